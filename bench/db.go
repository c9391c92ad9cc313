package main

import (
	"context"

	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/repository"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// freshSchema creates an empty schema (the suite's own, internal/dbtest) and
// returns its name and a DSN whose search_path selects it.
func freshSchema(ctx context.Context, dsn, prefix string) (string, string, error) {
	return dbtest.NewSchema(ctx, dsn, prefix+"_")
}

// store opens connstore on a fresh schema: plugin, migrations, repository.
func store(ctx context.Context, dsn string, opts repository.Options) (*gorm.DB, *repository.Repository, string, error) {
	_, sdsn, err := freshSchema(ctx, dsn, "cs")
	if err != nil {
		return nil, nil, "", err
	}
	db, err := gorm.Open(postgres.Open(sdsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return nil, nil, "", err
	}
	raw, _ := db.DB()
	raw.SetMaxOpenConns(40)
	raw.SetMaxIdleConns(40)
	repo, err := dbtest.Install(ctx, db, nil, opts)
	return db, repo, sdsn, err
}

// dropSchema drops the schema db works in and closes db: each measured run
// leaves nothing behind for autovacuum to work through while the next run
// is measured (both sides alike).
func dropSchema(ctx context.Context, db *gorm.DB) error {
	err := db.WithContext(ctx).Exec("DROP SCHEMA " + currentSchema(db) + " CASCADE").Error
	if raw, rawErr := db.DB(); rawErr == nil {
		_ = raw.Close()
	}
	return err
}

func currentSchema(db *gorm.DB) string {
	var s string
	db.Raw("SELECT current_schema()").Scan(&s)
	return s
}
