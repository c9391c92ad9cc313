package main

import (
	"context"
	"fmt"

	"github.com/connstore/connstore/migrations"
)

func migrateUp(ctx context.Context, c *cli) error {
	db, err := c.open(true)
	if err != nil {
		return err
	}
	before, _, err := migrations.Status(ctx, db)
	if err != nil {
		return err
	}
	if err := migrations.Migrate(ctx, db); err != nil {
		return err
	}
	var applied []string
	for _, m := range before {
		if !m.Applied {
			applied = append(applied, m.ID)
		}
	}
	return c.message(map[string]any{"applied": applied},
		fmt.Sprintf("applied %d migrations; the schema is up to date", len(applied)))
}

func migrateStatus(ctx context.Context, c *cli) error {
	db, err := c.open(false)
	if err != nil {
		return err
	}
	list, unknown, err := migrations.Status(ctx, db)
	if err != nil {
		return err
	}
	t := table{v: map[string]any{"migrations": list, "unknown": unknown}, header: []string{"MIGRATION", "STATUS"}}
	for _, m := range list {
		status := "pending"
		if m.Applied {
			status = "applied"
		}
		t.rows = append(t.rows, []string{m.ID, status})
	}
	for _, id := range unknown {
		t.rows = append(t.rows, []string{id, "applied, unknown to this version"})
	}
	return c.print(t)
}
