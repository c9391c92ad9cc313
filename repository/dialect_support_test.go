package repository_test

import (
	"path/filepath"
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/sqlite"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// otherDatabase is a dialector the store does not run on.
type otherDatabase struct{ gorm.Dialector }

func (otherDatabase) Name() string { return "mysql" }

// TestNewRefusesOtherDatabases: New refuses a handle of a database other
// than PostgreSQL and SQLite instead of running SQLite's statements on it.
func TestNewRefusesOtherDatabases(t *testing.T) {
	db, err := gorm.Open(otherDatabase{sqlite.Open(filepath.Join(t.TempDir(), "x.db"))}, &gorm.Config{Logger: logger.Discard})
	require.NoError(t, err)
	require.NoError(t, db.Use(hooks.New(hooks.Config{})))
	_, err = repository.New(db, repository.Options{})
	require.ErrorIs(t, err, repository.ErrInvalidInput)
	require.ErrorContains(t, err, "not mysql")
}
