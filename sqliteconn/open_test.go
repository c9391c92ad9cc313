package sqliteconn

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

type counter struct {
	ID int `gorm:"primaryKey"`
	N  int
}

func open(t *testing.T, path string, prepare bool) *gorm.DB {
	t.Helper()
	db, err := Open(path, Options{Config: &gorm.Config{Logger: logger.Discard, PrepareStmt: prepare}})
	require.NoError(t, err)
	raw, err := db.DB()
	require.NoError(t, err)
	t.Cleanup(func() { _ = raw.Close() })
	return db
}

// lockedErr reports SQLite's lock errors, the ones Open exists to hide.
func lockedErr(err error) bool {
	return err != nil && (isBusy(err) || strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy"))
}

// TestOpenConcurrentWriters: goroutines mixing transactions, UPDATE …
// RETURNING outside a transaction, plain writes and reads, on one handle
// and on a second handle of the same file (another instance), with and
// without gorm's PrepareStmt, never see "database is locked" and lose no
// increment.
func TestOpenConcurrentWriters(t *testing.T) {
	for _, prepare := range []bool{false, true} {
		t.Run(fmt.Sprintf("prepare=%v", prepare), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "c.db")
			a := open(t, path, prepare)
			require.NoError(t, a.AutoMigrate(&counter{}))
			require.NoError(t, a.Create(&counter{ID: 1}).Error)
			b := open(t, path, prepare)
			const workers, rounds = 8, 150
			increments := 0
			for i := range rounds {
				if i%4 != 3 {
					increments += workers
				}
			}
			var wg sync.WaitGroup
			errs := make(chan error, workers*rounds)
			for w := range workers {
				db := a
				if w%4 == 3 {
					db = b
				}
				wg.Go(func() {
					for i := range rounds {
						var err error
						switch i % 4 {
						case 0:
							err = db.Transaction(func(tx *gorm.DB) error {
								var c counter
								if err := tx.First(&c, 1).Error; err != nil {
									return err
								}
								return tx.Model(&c).Update("n", c.N+1).Error
							})
						case 1:
							var out []counter
							err = db.Raw("UPDATE counters SET n = n + 1 WHERE id = 1 RETURNING id, n").Scan(&out).Error
							if err == nil && len(out) != 1 {
								err = errors.New("RETURNING read no row")
							}
						case 2:
							err = db.Exec("UPDATE counters SET n = n + 1 WHERE id = 1").Error
						case 3:
							var c counter
							err = db.First(&c, 1).Error
						}
						if err != nil {
							errs <- err
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				require.False(t, lockedErr(err), "%v", err)
				require.NoError(t, err)
			}
			var c counter
			require.NoError(t, a.First(&c, 1).Error)
			require.Equal(t, increments, c.N)
		})
	}
}

// TestOpenDeadlineWhileLocked: while a transaction holds the write lock —
// on the same handle, or on another handle of the file (another process) —
// a write with a 300 ms deadline returns context.DeadlineExceeded within
// twice that, for a plain write, an UPDATE … RETURNING and a transaction,
// and a read is not held up at all.
func TestOpenDeadlineWhileLocked(t *testing.T) {
	for _, holder := range []string{"same handle", "other handle"} {
		t.Run(holder, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "d.db")
			db := open(t, path, false)
			require.NoError(t, db.AutoMigrate(&counter{}))
			require.NoError(t, db.Create(&counter{ID: 1}).Error)
			h := db
			if holder == "other handle" {
				h = open(t, path, false)
			}
			tx := h.Begin()
			require.NoError(t, tx.Error)
			defer tx.Rollback()
			require.NoError(t, tx.Exec("UPDATE counters SET n = 7").Error)

			calls := map[string]func(*gorm.DB) error{
				"exec": func(d *gorm.DB) error { return d.Exec("UPDATE counters SET n = n + 1").Error },
				"returning": func(d *gorm.DB) error {
					var out []counter
					return d.Raw("UPDATE counters SET n = n + 1 RETURNING id, n").Scan(&out).Error
				},
				"transaction": func(d *gorm.DB) error {
					return d.Transaction(func(tx *gorm.DB) error { return tx.Exec("UPDATE counters SET n = 1").Error })
				},
			}
			for name, call := range calls {
				c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
				start := time.Now()
				err := call(db.WithContext(c))
				cancel()
				require.ErrorIs(t, err, context.DeadlineExceeded, name)
				require.Less(t, time.Since(start), 600*time.Millisecond, name)
			}
			c, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			defer cancel()
			var got counter
			require.NoError(t, db.WithContext(c).First(&got, 1).Error, "a read waits for no writer")
			require.Equal(t, 0, got.N, "the read sees the last commit")
		})
	}
}

// TestOpenMaxWait: with no deadline of its own, a write waits MaxWait.
func TestOpenMaxWait(t *testing.T) {
	db, err := Open(filepath.Join(t.TempDir(), "w.db"), Options{Config: &gorm.Config{Logger: logger.Discard}, MaxWait: 100 * time.Millisecond})
	require.NoError(t, err)
	require.NoError(t, db.AutoMigrate(&counter{}))
	tx := db.Begin()
	require.NoError(t, tx.Error)
	defer tx.Rollback()
	start := time.Now()
	err = db.Exec("UPDATE counters SET n = 1").Error
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Less(t, time.Since(start), time.Second)
}

// TestOpenFailedStatementsFreeTheSlot: a write that fails (a constraint)
// inside its implicit transaction, a rolled-back transaction and a query
// whose rows are closed early all give the slot back.
func TestOpenFailedStatementsFreeTheSlot(t *testing.T) {
	db := open(t, filepath.Join(t.TempDir(), "f.db"), false)
	require.NoError(t, db.AutoMigrate(&counter{}))
	require.NoError(t, db.Create(&counter{ID: 1}).Error)
	require.Error(t, db.Exec("INSERT INTO counters (id, n) VALUES (1, 0)").Error)
	var out []counter
	require.Error(t, db.Raw("INSERT INTO counters (id, n) VALUES (1, 0) RETURNING id").Scan(&out).Error)
	require.Error(t, db.Transaction(func(tx *gorm.DB) error {
		require.NoError(t, tx.Exec("UPDATE counters SET n = 5").Error)
		return errors.New("undo")
	}))
	rows, err := db.Raw("UPDATE counters SET n = n + 1 RETURNING id").Rows()
	require.NoError(t, err)
	require.True(t, rows.Next(), "one row read, the rest left unread")
	require.NoError(t, rows.Close())
	c, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	require.NoError(t, db.WithContext(c).Exec("UPDATE counters SET n = n + 1").Error, "the slot was left held")
	var got counter
	require.NoError(t, db.First(&got, 1).Error)
	require.Equal(t, 2, got.N, "the rolled-back transaction changed nothing; both updates landed")
}

// TestOpenMemory: an in-memory database is one connection, so every
// statement sees the same database.
func TestOpenMemory(t *testing.T) {
	db := open(t, ":memory:", false)
	require.NoError(t, db.AutoMigrate(&counter{}))
	require.NoError(t, db.Create(&counter{ID: 1}).Error)
	var n int64
	require.NoError(t, db.Model(&counter{}).Count(&n).Error)
	require.EqualValues(t, 1, n)
}

// A path holding the characters a file: URI reads as syntax ('?', '#',
// '%') opens and creates exactly the named file, through Open and DSN.
func TestOpenPathWithURICharacters(t *testing.T) {
	for _, name := range []string{"app#2.db", "app?mode=ro.db", "app%20x.db", "a%3fb#c?d.db"} {
		dir := t.TempDir()
		path := filepath.Join(dir, name)
		db, err := Open(path, Options{})
		require.NoError(t, err, name)
		require.NoError(t, db.Exec("CREATE TABLE t (x INTEGER)").Error, name)
		raw, err := db.DB()
		require.NoError(t, err)
		require.NoError(t, raw.Close())
		entries, err := os.ReadDir(dir)
		require.NoError(t, err)
		var names []string
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), "-wal") && !strings.HasSuffix(e.Name(), "-shm") {
				names = append(names, e.Name())
			}
		}
		require.Equal(t, []string{name}, names, "only the named file was created")
	}
}
