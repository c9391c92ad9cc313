package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/repository"
	"github.com/connstore/connstore/sqliteconn"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// cli is one invocation: its flags, output and the database it opened.
type cli struct {
	fs         *flag.FlagSet
	dsn        string
	json       bool
	stdout     io.Writer
	positional []string
	db         *gorm.DB
	f          flagValues
}

// flagValues are what the commands' own flags fill in.
type flagValues struct {
	connector, owner, states, state, after, status, errText, ifStatus string
	overdueAfter, olderThan                                           time.Duration
	overdue, resetAttempts, force                                     bool
	limit, maxPasses                                                  int
	afterDue                                                          int64
	// accounts
	until                               time.Duration
	maxInFlight, rate, burst, growAfter int64
	period                              time.Duration
	adaptive, fair, ordered, pausedOnly bool
	// bulk
	account, before string
	dryRun, every   bool
	// serve
	addr            string
	public, actions bool
	refresh         time.Duration
}

func newCLI(stdout io.Writer, getenv func(string) string) *cli {
	c := &cli{fs: flag.NewFlagSet("connstore", flag.ContinueOnError), stdout: stdout}
	c.fs.SetOutput(io.Discard) // errors are reported once, by run
	c.fs.StringVar(&c.dsn, "dsn", getenv("CONNSTORE_DSN"),
		"PostgreSQL URL or key=value DSN, or a SQLite file path (default $CONNSTORE_DSN)")
	c.fs.BoolVar(&c.json, "json", false, "print JSON instead of a table")
	return c
}

// parse parses flags anywhere among args (flag stops at the first
// positional argument; an operator types "ops cancel C OP -force" as often
// as "ops cancel -force C OP") and returns the positional arguments. With
// stop > 0 it returns once it has that many, the unparsed rest after them.
func (c *cli) parse(args []string, stop int) (positional, rest []string, err error) {
	for {
		if err := c.fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				var b strings.Builder
				c.fs.SetOutput(&b)
				c.fs.PrintDefaults()
				c.fs.SetOutput(io.Discard)
				return nil, nil, fmt.Errorf("%w: flags:\n%s", errUsage, b.String())
			}
			return nil, nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		rest := c.fs.Args()
		if len(rest) > 0 && len(rest) < len(args) && args[len(args)-len(rest)-1] == "--" {
			// "--" ends the flags: everything after it is positional, an
			// operation id starting with '-' included.
			if stop > 0 && len(positional)+len(rest) > stop {
				n := stop - len(positional)
				return append(positional, rest[:n]...), append([]string{"--"}, rest[n:]...), nil
			}
			return append(positional, rest...), nil, nil
		}
		args = rest
		if len(args) == 0 {
			return positional, nil, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
		if stop > 0 && len(positional) == stop {
			return positional, args, nil
		}
	}
}

// keyValueDSN matches the start of a PostgreSQL key=value DSN
// ("host=db port=5432 …"): a bare keyword, then '='. A path holding '='
// (a "shard=2" directory) does not start that way.
var keyValueDSN = regexp.MustCompile(`^\s*[a-z_]+\s*=`)

// isPostgres reports whether dsn names PostgreSQL rather than a SQLite file.
func isPostgres(dsn string) bool {
	return strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") || keyValueDSN.MatchString(dsn)
}

// open opens the database with the lock plugin. A SQLite file must exist
// unless create is set (only "migrate up" creates one): a mistyped path
// must not quietly leave an empty database behind.
func (c *cli) open(create bool) (*gorm.DB, error) {
	if c.dsn == "" {
		return nil, fmt.Errorf("%w: no database: pass -dsn or set CONNSTORE_DSN", errUsage)
	}
	cfg := &gorm.Config{Logger: logger.Discard}
	var db *gorm.DB
	var err error
	if isPostgres(c.dsn) {
		if _, perr := pgconn.ParseConfig(c.dsn); perr != nil {
			return nil, fmt.Errorf("-dsn is not a valid PostgreSQL DSN: %w", perr)
		}
		db, err = gorm.Open(postgres.Open(c.dsn), cfg)
	} else {
		if _, serr := os.Stat(c.dsn); serr != nil && !create {
			return nil, fmt.Errorf("SQLite file %s: %w (run \"connstore migrate up\" to create it)", c.dsn, serr)
		}
		db, err = sqliteconn.Open(c.dsn, sqliteconn.Options{Config: cfg})
	}
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	c.db = db
	if err := db.Use(hooks.New(hooks.Config{})); err != nil {
		return nil, err
	}
	return db, nil
}

// repo opens the database and returns a repository on it.
func (c *cli) repo() (*repository.Repository, error) {
	db, err := c.open(false)
	if err != nil {
		return nil, err
	}
	return repository.New(db, repository.Options{})
}

func (c *cli) close() {
	if c.db == nil {
		return
	}
	if sqlDB, err := c.db.DB(); err == nil {
		_ = sqlDB.Close()
	}
}

// oneLine flattens an error's text to one line.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
