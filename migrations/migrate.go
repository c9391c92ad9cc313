package migrations

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// TableName is the table that records which migration ids have run.
const TableName = "kubun_connector_migrations"

// ErrNothingToRollback is returned by RollbackLast when no migration has run.
var ErrNothingToRollback = errors.New("connstore: no migration to roll back")

// advisoryNamespace is the first key of the Postgres advisory lock; the
// second is the schema's hash, so instances sharing a schema serialize while
// different schemas (tests, tenants) migrate in parallel.
const advisoryNamespace = 0x636f6e6e // "conn"

// IDs returns the migration ids in the order they apply.
func IDs() []string {
	list := all()
	ids := make([]string, len(list))
	for i, m := range list {
		ids[i] = m.ID
	}
	return ids
}

// Migrate applies every pending migration in one transaction. It is
// idempotent, and on Postgres it takes a transaction-scoped advisory lock so
// that app instances starting at once run each migration exactly once (on
// SQLite the write transaction itself serializes them). Then it numbers the
// journal's rows migration 0019 left unnumbered (FillSeq), in short
// transactions of their own, and returns once every row is.
func Migrate(ctx context.Context, db *gorm.DB) error {
	err := locked(ctx, db, func(m *gormigrate.Gormigrate) error {
		if err := m.Migrate(); err != nil {
			return fmt.Errorf("migrate: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	_, err = FillSeq(ctx, db)
	return err
}

// RollbackLast undoes the most recently applied migration.
func RollbackLast(ctx context.Context, db *gorm.DB) error {
	return locked(ctx, db, func(m *gormigrate.Gormigrate) error {
		err := m.RollbackLast()
		if errors.Is(err, gormigrate.ErrNoRunMigration) {
			return ErrNothingToRollback
		}
		if err != nil {
			return fmt.Errorf("roll back last migration: %w", err)
		}
		return nil
	})
}

func locked(ctx context.Context, db *gorm.DB, run func(*gormigrate.Gormigrate) error) error {
	return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if tx.Dialector.Name() == "postgres" {
			err := tx.Exec("SELECT pg_advisory_xact_lock(?, hashtext(current_schema()))", advisoryNamespace).Error
			if err != nil {
				return fmt.Errorf("take migration lock: %w", err)
			}
		}
		opts := *gormigrate.DefaultOptions
		opts.TableName = TableName
		return run(gormigrate.New(tx, &opts, all()))
	})
}
