package main

import (
	"context"
	"fmt"
	"time"

	"github.com/connstore/connstore/repository"
)

func retentionFlags(c *cli) {
	c.fs.DurationVar(&c.f.olderThan, "older-than", 30*24*time.Hour, "collect rows last written longer ago than this")
	c.fs.IntVar(&c.f.limit, "limit", 1000, "most rows one pass deletes")
	c.fs.IntVar(&c.f.maxPasses, "max-passes", 0, "stop after this many passes (0: until a pass deletes less than -limit)")
}

// retentionRun runs passes until one deletes less than the limit: each pass
// is bounded (it examines a few times the limit), so a large backlog is
// drained in steps of equal cost and Ctrl-C stops between them.
func retentionRun(ctx context.Context, c *cli) error {
	repo, err := c.repo()
	if err != nil {
		return err
	}
	before := time.Now().Add(-c.f.olderThan)
	total, passes := int64(0), 0
	for c.f.maxPasses == 0 || passes < c.f.maxPasses {
		n, err := repo.CollectFinishedOperations(ctx, repository.CollectParams{Before: before, Limit: c.f.limit})
		if err != nil {
			return fmt.Errorf("after %d passes (%d deleted): %w", passes, total, err)
		}
		total += n
		passes++
		if n < int64(c.f.limit) {
			break
		}
	}
	return c.message(map[string]any{"deleted": total, "passes": passes},
		fmt.Sprintf("deleted %d finished operations in %d %s", total, passes, map[bool]string{true: "pass", false: "passes"}[passes == 1]))
}

func authPurgeFlags(c *cli) {
	c.fs.DurationVar(&c.f.olderThan, "expired-for", 0, "delete records expired at least this long ago")
	c.fs.IntVar(&c.f.limit, "limit", 1000, "most records one statement deletes")
}

func authPurge(ctx context.Context, c *cli) error {
	repo, err := c.repo()
	if err != nil {
		return err
	}
	before := time.Now().Add(-c.f.olderThan)
	total := int64(0)
	for {
		n, err := repo.PurgePendingAuths(ctx, repository.PurgeParams{Before: before, Limit: c.f.limit})
		if err != nil {
			return fmt.Errorf("after %d deleted: %w", total, err)
		}
		total += n
		if n < int64(c.f.limit) {
			break
		}
	}
	return c.message(map[string]any{"deleted": total}, fmt.Sprintf("deleted %d expired pending authorizations", total))
}
