package dbtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"strings"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// PostgresEnv names the environment variable with the PostgreSQL server's
// DSN (a URL) the tests run against.
const PostgresEnv = "CONNSTORE_TEST_PG_DSN"

// SchemaDSN creates a schema on the PostgreSQL server at dsn (or, if dsn is
// empty, at $CONNSTORE_TEST_PG_DSN) and returns dsn with a search_path
// selecting it; the schema is dropped when the test ends. Without a DSN the
// test is skipped, or failed when CI=true, so a CI run never passes by
// skipping its database; an unreachable server fails the test. Its
// messages name connstoretest, the public package users call it through.
func SchemaDSN(t testing.TB, dsn string) string {
	t.Helper()
	if dsn == "" {
		dsn = os.Getenv(PostgresEnv)
	}
	if dsn == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("connstoretest: %s is not set; PostgreSQL tests cannot be skipped under CI", PostgresEnv)
		}
		t.Skipf("connstoretest: %s is not set; skipping PostgreSQL", PostgresEnv)
	}
	name, schemaDSN, err := NewSchema(context.Background(), dsn, "connstoretest_")
	if err != nil {
		t.Fatalf("connstoretest: PostgreSQL at %s is not reachable: %v", PostgresEnv, err)
	}
	t.Cleanup(func() {
		if err := DropSchema(context.Background(), dsn, name); err != nil {
			t.Logf("connstoretest: drop schema %s: %v", name, err)
		}
	})
	return schemaDSN
}

// NewSchema creates an empty schema named prefix and random hex on the
// PostgreSQL server at dsn (a URL), and returns its name and dsn with a
// search_path selecting it. The caller drops it (DropSchema).
func NewSchema(ctx context.Context, dsn, prefix string) (name, schemaDSN string, err error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", "", fmt.Errorf("the DSN must be a URL: %w", err)
	}
	name = prefix + RandomHex(8)
	if err := onServer(ctx, dsn, "CREATE SCHEMA "+name); err != nil {
		return "", "", fmt.Errorf("create schema: %w", err)
	}
	q := u.Query()
	q.Set("search_path", name)
	u.RawQuery = q.Encode()
	return name, u.String(), nil
}

// DropSchema drops the schema name (from NewSchema) and everything in it.
func DropSchema(ctx context.Context, dsn, name string) error {
	return onServer(ctx, dsn, "DROP SCHEMA "+name+" CASCADE")
}

// NewDatabase creates a database named prefix and random hex (with the
// CREATE DATABASE options given) through the server at adminDSN, drops it,
// connections and all, when the test ends, and returns dsn pointed at it
// without a search_path.
func NewDatabase(t testing.TB, adminDSN, dsn, prefix string, options ...string) string {
	t.Helper()
	name := prefix + RandomHex(8)
	stmt := strings.Join(append([]string{"CREATE DATABASE", name}, options...), " ")
	if err := onServer(context.Background(), adminDSN, stmt); err != nil {
		t.Fatalf("the server at %s: %v", adminDSN, err)
	}
	t.Cleanup(func() { _ = onServer(context.Background(), adminDSN, "DROP DATABASE "+name+" WITH (FORCE)") })
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	u.Path = "/" + name
	q := u.Query()
	q.Del("search_path")
	u.RawQuery = q.Encode()
	return u.String()
}

// RandomHex is n random bytes in hex, for names no other run uses.
func RandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// onServer runs one statement on a connection of its own to the server at
// dsn.
func onServer(ctx context.Context, dsn, stmt string) error {
	admin, err := gorm.Open(postgres.Open(dsn), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return err
	}
	raw, err := admin.DB()
	if err != nil {
		return err
	}
	defer raw.Close()
	return admin.WithContext(ctx).Exec(stmt).Error
}
