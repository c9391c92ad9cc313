package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
)

// command is one leaf of the command tree.
type command struct {
	// run does the work once the flags are parsed.
	run func(ctx context.Context, c *cli) error
	// flags declares the command's own flags on c.fs.
	flags func(c *cli)
	// args is the number of positional arguments and their names.
	args []string
}

// commands maps "group verb" to its command.
var commands = map[string]command{
	"migrate up":           {run: migrateUp},
	"migrate status":       {run: migrateStatus},
	"ops counts":           {run: opsCounts, flags: opsCountsFlags},
	"ops list":             {run: opsList, flags: opsListFlags},
	"ops show":             {run: opsShow, args: []string{"CALLER/OPERATION"}},
	"ops requeue":          {run: opsRequeue, flags: opsRequeueFlags, args: []string{"CALLER/OPERATION"}},
	"ops cancel":           {run: opsCancel, flags: opsCancelFlags, args: []string{"CALLER/OPERATION"}},
	"ops requeue-matching": {run: opsRequeueMatching, flags: requeueMatchingFlags},
	"ops cancel-matching":  {run: opsCancelMatching, flags: cancelMatchingFlags},
	"sync list":            {run: syncList, flags: syncListFlags},
	"sync set-status":      {run: syncSetStatus, flags: syncSetStatusFlags},
	"retention run":        {run: retentionRun, flags: retentionFlags},
	"auth purge":           {run: authPurge, flags: authPurgeFlags},
	"accounts list":        {run: accountsList, flags: accountsListFlags},
	"accounts set":         {run: accountsSet, flags: accountsSetFlags, args: []string{"CONNECTOR/ACCOUNT"}},
	"accounts pause":       {run: accountsPause, flags: accountsPauseFlags, args: []string{"CONNECTOR/ACCOUNT"}},
	"accounts resume":      {run: accountsResume, args: []string{"CONNECTOR/ACCOUNT"}},
	// A command of one word has no verb.
	"serve": {run: serve, flags: serveFlags},
}

// dispatch finds the command named by args, parses its flags and runs it.
func dispatch(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	c := newCLI(stdout, getenv)
	// Global flags may come before the command as well as after it. The
	// group is read first: a one-word command (serve) takes its own flags
	// right after it, which the global flag set does not know.
	words, rest, err := c.parse(args, 1)
	if err != nil {
		return err
	}
	if len(words) == 0 {
		return fmt.Errorf("%w: a command is required", errUsage)
	}
	name := words[0]
	if commands[name].run == nil {
		verb, more, err := c.parse(rest, 1)
		if err != nil {
			return err
		}
		switch {
		case len(verbsOf(name)) == 0:
			return fmt.Errorf("%w: unknown command %q", errUsage, name)
		case len(verb) == 0:
			return fmt.Errorf("%w: %s needs one of: %s", errUsage, name, strings.Join(verbsOf(name), ", "))
		}
		name, rest = name+" "+verb[0], more
	}
	cmd, ok := commands[name]
	if !ok {
		return fmt.Errorf("%w: unknown command %q", errUsage, name)
	}
	if cmd.flags != nil {
		cmd.flags(c)
	}
	if c.positional, _, err = c.parse(rest, 0); err != nil {
		return err
	}
	if len(c.positional) != len(cmd.args) {
		return fmt.Errorf("%w: %s takes %d arguments (%s), got %d", errUsage, name, len(cmd.args),
			strings.Join(cmd.args, " "), len(c.positional))
	}
	defer c.close()
	return cmd.run(ctx, c)
}

// verbsOf lists the verbs of a command group, sorted; none for a word that
// is not a group.
func verbsOf(group string) []string {
	var verbs []string
	for name := range commands {
		if g, verb, _ := strings.Cut(name, " "); g == group {
			verbs = append(verbs, verb)
		}
	}
	slices.Sort(verbs)
	return verbs
}
