package main

import (
	"context"
	"fmt"
	"time"

	"github.com/connstore/connstore/repository"
)

func bulkFlags(c *cli, state string) {
	c.fs.StringVar(&c.f.state, "state", state, "the state acted on")
	c.fs.Var((*partFlag)(&c.f.connector), "connector", "only this connector")
	c.fs.Var((*partFlag)(&c.f.owner), "owner", "only this owner DID")
	c.fs.Var((*partFlag)(&c.f.account), "account", "only this account key")
	c.fs.StringVar(&c.f.before, "before", "", "only operations last written (for dead ones: finished) before this RFC 3339 time")
	c.fs.IntVar(&c.f.limit, "limit", repository.MaxBulk, fmt.Sprintf("most operations one call matches (at most %d)", repository.MaxBulk))
	c.fs.BoolVar(&c.f.dryRun, "dry-run", false, "count what would change and change nothing")
	c.fs.BoolVar(&c.f.every, "all", false, "call again until no match is left (each call bounded by -limit)")
}

func requeueMatchingFlags(c *cli) {
	bulkFlags(c, "dead")
	c.fs.BoolVar(&c.f.resetAttempts, "reset-attempts", false, "start the attempt count again at zero")
}

func cancelMatchingFlags(c *cli) { bulkFlags(c, "attempted") }

// bulkParams reads the bulk flags.
func (c *cli) bulkParams() (repository.BulkParams, error) {
	p := repository.BulkParams{State: c.f.state, ConnectorName: c.f.connector, OwnerDID: c.f.owner,
		AccountKey: c.f.account, Limit: c.f.limit, DryRun: c.f.dryRun}
	if c.f.before != "" {
		t, err := time.Parse(time.RFC3339, c.f.before)
		if err != nil {
			return p, fmt.Errorf("%w: -before %q is not an RFC 3339 time", errUsage, c.f.before)
		}
		p.Before = t
	}
	if c.f.limit < 1 || c.f.limit > repository.MaxBulk {
		return p, fmt.Errorf("%w: -limit %d is not 1 to %d", errUsage, c.f.limit, repository.MaxBulk)
	}
	return p, nil
}

// bulkTotal is what a bulk command did over all its calls.
type bulkTotal struct {
	Matched int  `json:"matched"`
	Changed int  `json:"changed"`
	Held    int  `json:"held"`
	Moved   int  `json:"moved"`
	Calls   int  `json:"calls"`
	DryRun  bool `json:"dry_run"`
	More    bool `json:"more"`
}

// runBulk calls one bulk action until it is done (-all) or once, each
// call resuming after the last one's rows.
func (c *cli) runBulk(ctx context.Context, verb string, call func(repository.BulkParams) (*repository.BulkResult, error)) error {
	p, err := c.bulkParams()
	if err != nil {
		return err
	}
	total := bulkTotal{DryRun: p.DryRun}
	for {
		res, err := call(p)
		if err != nil {
			return err
		}
		total.Calls++
		total.Matched += res.Matched
		total.Changed += res.Changed
		total.Held += res.Held
		total.Moved += res.Moved
		total.More = res.More
		if !res.More || !c.f.every {
			break
		}
		p.After = res.Next
	}
	text := fmt.Sprintf("%s %d of %d matched", verb, total.Changed, total.Matched)
	if p.DryRun {
		text = fmt.Sprintf("dry run: would %s %d of %d matched", verb, total.Matched-total.Held, total.Matched)
	}
	if total.Held > 0 {
		text += fmt.Sprintf("; %d under a live lease left to their holders", total.Held)
	}
	if total.Moved > 0 {
		text += fmt.Sprintf("; %d moved by others since read, left alone", total.Moved)
	}
	if total.More {
		text += fmt.Sprintf("; more may match: pass -all to go on past the first %d (each call matches at most -limit)", p.Limit)
	}
	return c.message(total, text)
}

func opsRequeueMatching(ctx context.Context, c *cli) error {
	repo, err := c.repo()
	if err != nil {
		return err
	}
	return c.runBulk(ctx, "requeue", func(p repository.BulkParams) (*repository.BulkResult, error) {
		return repo.RequeueMatching(ctx, repository.BulkRequeueParams{BulkParams: p, ResetAttempts: c.f.resetAttempts})
	})
}

func opsCancelMatching(ctx context.Context, c *cli) error {
	repo, err := c.repo()
	if err != nil {
		return err
	}
	return c.runBulk(ctx, "cancel", func(p repository.BulkParams) (*repository.BulkResult, error) {
		return repo.CancelMatching(ctx, p)
	})
}
