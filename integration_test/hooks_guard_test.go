package integrationtest

import (
	"github.com/connstore/connstore/connstoretest"
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/plugin/dbresolver"
)

// shelf and book are a locked parent and its locked children, for writes
// that save associations.
type shelf struct {
	ID    int64 `gorm:"primaryKey"`
	Name  string
	Books []book `gorm:"foreignKey:ShelfID"`
	models.Lock
}

func (shelf) TableName() string { return "app_shelf" }

type book struct {
	ID      int64 `gorm:"primaryKey"`
	ShelfID int64
	Title   string
	models.Lock
}

func (book) TableName() string { return "app_book" }

// secondInstance is another application instance on e's database: its own
// handle and its own plugin, as a second process would have.
func secondInstance(t *testing.T, e *env, cfg hooks.Config) *gorm.DB {
	t.Helper()
	db := openDSN(t, e.kind, e.dsn)
	if cfg.NewIDFunc == nil {
		cfg.NewIDFunc = connstoretest.NewIDs("b").Next
	}
	require.NoError(t, db.Use(hooks.New(cfg)))
	return db
}

func loadShelf(t *testing.T, db *gorm.DB, id int64) *shelf {
	t.Helper()
	var s shelf
	require.NoError(t, db.Preload("Books", func(db *gorm.DB) *gorm.DB { return db.Order("id") }).Take(&s, id).Error)
	return &s
}

func loadBook(t *testing.T, db *gorm.DB, id int64) *book {
	t.Helper()
	var b book
	require.NoError(t, db.Take(&b, id).Error)
	return &b
}

// TestHookSaveNeverResurrects (issue 16 item 2): a Save carrying the lock it
// was read with is an update or ErrConflict, never an insert, so a row
// another instance deleted stays deleted (no ABA through Save). A Save of a
// row never read inserts it when absent and is ErrConflict, not an
// overwrite, when it exists. A refused parent leaves no child behind.
func TestHookSaveNeverResurrects(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		migrateAppModels(t, e.db)
		require.NoError(t, e.db.AutoMigrate(&shelf{}, &book{}))
		a, b := e.db, secondInstance(t, e, hooks.Config{})

		// Read on A, deleted on B, saved on A.
		require.NoError(t, a.Create(&account{ID: 1, Owner: "a", Balance: 1}).Error)
		read := loadAccount(t, a, 1)
		inc := *read.Incarnation
		require.NoError(t, b.Delete(&account{}, 1).Error)
		read.Balance = 2
		require.ErrorIs(t, a.Save(read).Error, hooks.ErrConflict)
		require.Zero(t, count(t, b, &account{}, "id = 1"), "the deleted row stays deleted")
		require.Equal(t, int64(0), read.Version, "a refused Save leaves the lock as read")
		require.Equal(t, inc, *read.Incarnation)

		// The same after the row moved on: read at version 1, then deleted.
		require.NoError(t, a.Create(&account{ID: 2, Owner: "a"}).Error)
		require.NoError(t, a.Model(loadAccount(t, a, 2)).Update("balance", 5).Error)
		read = loadAccount(t, a, 2)
		require.NoError(t, b.Delete(&account{}, 2).Error)
		require.ErrorIs(t, a.Save(read).Error, hooks.ErrConflict)
		require.Zero(t, count(t, b, &account{}, "id = 2"))

		// Deleted and recreated on B: B's row is kept as B wrote it.
		require.NoError(t, a.Create(&account{ID: 3, Owner: "a"}).Error)
		read = loadAccount(t, a, 3)
		require.NoError(t, b.Delete(&account{}, 3).Error)
		require.NoError(t, b.Create(&account{ID: 3, Owner: "b", Balance: 30}).Error)
		read.Balance = 99
		require.ErrorIs(t, a.Save(read).Error, hooks.ErrConflict)
		got := loadAccount(t, b, 3)
		require.Equal(t, "b", got.Owner)
		require.Equal(t, int64(30), got.Balance)

		// Never read (zero lock): inserted when absent ...
		fresh := &account{ID: 4, Owner: "new", Balance: 4}
		require.NoError(t, a.Save(fresh).Error)
		got = loadAccount(t, b, 4)
		require.Equal(t, int64(4), got.Balance)
		require.Equal(t, int64(0), got.Version)
		require.NotNil(t, got.Incarnation)
		require.Equal(t, *got.Incarnation, *fresh.Incarnation, "the model holds the lock it was inserted with")
		require.Equal(t, int64(0), fresh.Version)
		// ... and ErrConflict, not an overwrite, when the row exists.
		err := a.Save(&account{ID: 4, Owner: "over", Balance: 44}).Error
		require.ErrorIs(t, err, hooks.ErrConflict)
		got = loadAccount(t, b, 4)
		require.Equal(t, "new", got.Owner)
		require.Equal(t, int64(0), got.Version)

		// A refused parent saves none of its children.
		require.NoError(t, a.Create(&shelf{ID: 1, Name: "s"}).Error)
		s := loadShelf(t, a, 1)
		require.NoError(t, b.Delete(&shelf{}, 1).Error)
		s.Books = append(s.Books, book{ID: 10, Title: "child"})
		require.ErrorIs(t, a.Save(s).Error, hooks.ErrConflict)
		require.Zero(t, count(t, b, &shelf{}, "id = 1"))
		require.Zero(t, count(t, b, &book{}), "no child of a refused parent is written")
	})
}

// TestHookMultiRowWritesGuarded (issue 16 item 3): Save of a slice and
// Model(&slice).Updates guard each row by its own lock, a child saved with
// FullSaveAssociations is guarded as a top-level write, and an UpdateAll
// upsert of rows carrying a read lock is refused. A refused statement
// writes none of its rows.
func TestHookMultiRowWritesGuarded(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		migrateAppModels(t, e.db)
		require.NoError(t, e.db.AutoMigrate(&shelf{}, &book{}))
		a, b := e.db, secondInstance(t, e, hooks.Config{})
		require.NoError(t, a.Create(&[]account{{ID: 1, Owner: "a"}, {ID: 2, Owner: "a"}}).Error)

		// Save(&[]T{stale}) after B's newer write.
		stale := *loadAccount(t, a, 1)
		require.NoError(t, b.Model(loadAccount(t, b, 1)).Update("balance", 10).Error)
		rows := []account{stale}
		rows[0].Balance = 99
		require.ErrorIs(t, a.Save(&rows).Error, hooks.ErrConflict)
		got := loadAccount(t, b, 1)
		require.Equal(t, int64(10), got.Balance, "B's write is kept")
		require.Equal(t, int64(1), got.Version)

		// A stale row among current and new ones: nothing is written.
		rows = []account{*loadAccount(t, a, 2), {ID: 3, Owner: "new"}, stale}
		rows[0].Balance = 20
		require.ErrorIs(t, a.Save(&rows).Error, hooks.ErrConflict)
		require.Equal(t, int64(0), loadAccount(t, b, 2).Balance)
		require.Equal(t, int64(0), loadAccount(t, b, 2).Version)
		require.Zero(t, count(t, b, &account{}, "id = 3"))
		require.Equal(t, int64(0), rows[0].Version, "the refused statement leaves each lock as read")

		// Current rows, and new ones, still save: each its own way.
		rows = []account{*loadAccount(t, a, 1), *loadAccount(t, a, 2), {ID: 4, Owner: "new", Balance: 4}}
		rows[0].Balance, rows[1].Balance = 11, 21
		res := a.Save(&rows)
		require.NoError(t, res.Error)
		require.Equal(t, int64(3), res.RowsAffected)
		for i, want := range []struct{ id, version, balance int64 }{{1, 2, 11}, {2, 1, 21}, {4, 0, 4}} {
			got := loadAccount(t, b, want.id)
			require.Equal(t, want.version, got.Version, "row %d", want.id)
			require.Equal(t, want.balance, got.Balance, "row %d", want.id)
			require.Equal(t, want.version, rows[i].Version, "row %d in memory", want.id)
			require.Equal(t, *got.Incarnation, *rows[i].Incarnation, "row %d in memory", want.id)
		}

		// Model(&[]T{stale}).Updates after B's newer write.
		stales := []account{*loadAccount(t, a, 1)}
		require.NoError(t, b.Model(loadAccount(t, b, 1)).Update("balance", 12).Error)
		require.ErrorIs(t, a.Model(&stales).Updates(map[string]any{"balance": 77}).Error, hooks.ErrConflict)
		require.Equal(t, int64(12), loadAccount(t, b, 1).Balance, "B's write is kept")
		// A current row beside the stale one is not written either.
		mixed := []account{*loadAccount(t, a, 2), stales[0]}
		require.ErrorIs(t, a.Model(&mixed).Updates(map[string]any{"owner": "z"}).Error, hooks.ErrConflict)
		require.Equal(t, "a", loadAccount(t, b, 2).Owner)
		require.Equal(t, int64(1), mixed[0].Version, "the refused statement leaves each lock as read")
		// Current rows are each bumped from their own version.
		cur := []account{*loadAccount(t, a, 1), *loadAccount(t, a, 2)}
		res = a.Model(&cur).Updates(map[string]any{"owner": "z"})
		require.NoError(t, res.Error)
		require.Equal(t, int64(2), res.RowsAffected)
		for i, want := range []struct{ id, version int64 }{{1, 4}, {2, 2}} {
			got := loadAccount(t, b, want.id)
			require.Equal(t, "z", got.Owner)
			require.Equal(t, want.version, got.Version, "row %d", want.id)
			require.Equal(t, want.version, cur[i].Version, "row %d in memory", want.id)
		}
		// A row of the slice without its key cannot be guarded.
		err := a.Model(&[]account{*loadAccount(t, a, 1), {Owner: "nokey"}}).Updates(map[string]any{"owner": "k"}).Error
		require.ErrorIs(t, err, hooks.ErrUnguardedWrite)
		require.Equal(t, "z", loadAccount(t, b, 1).Owner)

		// A child saved through FullSaveAssociations is guarded.
		require.NoError(t, a.Create(&shelf{ID: 1, Name: "s", Books: []book{{ID: 1, Title: "one"}, {ID: 2, Title: "two"}}}).Error)
		s := loadShelf(t, a, 1)
		require.NoError(t, b.Model(loadBook(t, b, 1)).Update("title", "theirs").Error)
		s.Name = "mine"
		s.Books[0].Title, s.Books[1].Title = "mine", "mine"
		full := a.Session(&gorm.Session{FullSaveAssociations: true})
		require.ErrorIs(t, full.Save(s).Error, hooks.ErrConflict)
		gotShelf := loadShelf(t, b, 1)
		require.Equal(t, "s", gotShelf.Name, "the parent's write is rolled back")
		require.Equal(t, int64(0), gotShelf.Version)
		require.Equal(t, "theirs", gotShelf.Books[0].Title, "B's write is kept")
		require.Equal(t, "two", gotShelf.Books[1].Title, "no sibling is written")
		require.Equal(t, int64(0), s.Version, "the refused statement leaves the parent's lock as read")
		// Re-read, the same save goes through, every child at its own lock.
		s = loadShelf(t, a, 1)
		s.Name, s.Books[0].Title = "mine", "mine"
		s.Books = append(s.Books, book{ID: 3, Title: "three"})
		require.NoError(t, full.Save(s).Error)
		gotShelf = loadShelf(t, b, 1)
		require.Equal(t, "mine", gotShelf.Name)
		require.Equal(t, []string{"mine", "two", "three"},
			[]string{gotShelf.Books[0].Title, gotShelf.Books[1].Title, gotShelf.Books[2].Title})
		require.Equal(t, []int64{2, 1, 0},
			[]int64{gotShelf.Books[0].Version, gotShelf.Books[1].Version, gotShelf.Books[2].Version})

		// An UpdateAll upsert of rows carrying a read lock is refused.
		loaded := []account{*loadAccount(t, a, 1)}
		loaded[0].Balance = 1234
		err = a.Clauses(clause.OnConflict{UpdateAll: true}).Create(&loaded).Error
		require.ErrorIs(t, err, hooks.ErrUnguardedWrite)
		require.ErrorContains(t, err, "app_account")
		require.Equal(t, int64(12), loadAccount(t, b, 1).Balance)
		// Rows never read upsert as before: stored version + 1.
		require.NoError(t, a.Clauses(clause.OnConflict{UpdateAll: true}).Create(&[]account{{ID: 1, Owner: "u", Balance: 5}}).Error)
		require.Equal(t, int64(5), loadAccount(t, b, 1).Balance)
		require.Equal(t, int64(5), loadAccount(t, b, 1).Version)
	})
}

// TestHookTableNamedWrites (issue 16 item 3): an update that names a locked
// model's table with no model bumps the version, so an older reader's
// compare-and-swap fails afterwards; the table is known from Config.Models
// before any write through the model, and from the writes the plugin has
// seen. Creates through the table name are seeded, and a struct without the
// lock cannot write into a locked table.
func TestHookTableNamedWrites(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		migrateAppModels(t, e.db)
		require.NoError(t, e.db.Create(&account{ID: 1, Owner: "a", Balance: 1}).Error)
		registered := secondInstance(t, e, hooks.Config{Models: []any{&account{}}})

		older, older2 := loadAccount(t, e.db, 1), loadAccount(t, e.db, 1)
		res := registered.Table("app_account").Where("id = ?", 1).Updates(map[string]any{"balance": 7, "version": 0})
		require.NoError(t, res.Error)
		require.Equal(t, int64(1), res.RowsAffected)
		got := loadAccount(t, e.db, 1)
		require.Equal(t, int64(7), got.Balance)
		require.Equal(t, int64(1), got.Version, "the table-named write bumps the version; the map's version is dropped")
		older.Balance = 100
		require.ErrorIs(t, e.db.Save(older).Error, hooks.ErrConflict)
		require.ErrorIs(t, e.db.Model(older2).Updates(map[string]any{"balance": 100}).Error, hooks.ErrConflict)
		require.Equal(t, int64(7), loadAccount(t, e.db, 1).Balance)

		// An instance that has written through the model knows its table,
		// by a schema-qualified name too.
		older = loadAccount(t, e.db, 1)
		require.NoError(t, e.db.Table("app_account").Where("id = ?", 1).Update("balance", 8).Error)
		require.ErrorIs(t, e.db.Model(older).Update("balance", 100).Error, hooks.ErrConflict)
		require.Equal(t, int64(2), loadAccount(t, e.db, 1).Version)
		if e.kind == pgKind {
			var schema string
			require.NoError(t, e.db.Raw("SELECT current_schema()").Scan(&schema).Error)
			require.NoError(t, e.db.Table(schema+".app_account").Where("id = ?", 1).Update("balance", 9).Error)
			require.Equal(t, int64(3), loadAccount(t, e.db, 1).Version)
		}

		// A create through the table name is seeded like any other insert.
		require.NoError(t, registered.Table("app_account").Create(map[string]any{"id": 5, "owner": "m", "version": 9}).Error)
		got = loadAccount(t, e.db, 5)
		require.Equal(t, int64(0), got.Version)
		require.NotNil(t, got.Incarnation)

		// A lockless struct cannot write into a locked table.
		err := registered.Table("app_account").Where("id = ?", 5).Updates(&plainAccount{Balance: 3}).Error
		require.ErrorIs(t, err, hooks.ErrUnguardedWrite)
		require.Equal(t, int64(0), loadAccount(t, e.db, 5).Balance)

		// A lockless model in Config.Models is a configuration error.
		bare := openDSN(t, e.kind, e.dsn)
		require.ErrorContains(t, bare.Use(hooks.New(hooks.Config{Models: []any{&plainAccount{}}})), "holds no models.Lock")
	})
}

// TestHookSaveBehindLaggingReplica (issue 16 item 4): behind dbresolver with
// a replica that lags (a separate database missing the row, or holding a
// stale copy), a Save of a never-read row that exists on the primary is
// ErrConflict every time, never an overwrite: nothing the plugin decides a
// write by is read from the replica.
func TestHookSaveBehindLaggingReplica(t *testing.T) {
	t.Parallel()
	e := setup(t, pgKind)
	migrateAppModels(t, e.db)
	replicaDSN := pgDatabaseDSN(t)
	replica := openDSN(t, pgKind, replicaDSN) // no plugin: it holds whatever it was sent
	require.NoError(t, replica.AutoMigrate(&account{}))
	db := openDSN(t, pgKind, e.dsn)
	require.NoError(t, db.Use(hooks.New(hooks.Config{Models: []any{&account{}}})))
	require.NoError(t, db.Use(dbresolver.Register(dbresolver.Config{Replicas: []gorm.Dialector{postgres.Open(replicaDSN)}})))

	// Row 1 has not reached the replica; row 2 reached it before its update.
	require.NoError(t, e.db.Create(&account{ID: 1, Owner: "primary", Balance: 100}).Error)
	require.NoError(t, e.db.Create(&account{ID: 2, Owner: "primary", Balance: 200}).Error)
	require.NoError(t, replica.Create(&account{ID: 2, Owner: "primary", Balance: 200}).Error)
	require.NoError(t, e.db.Model(loadAccount(t, e.db, 2)).Update("balance", 201).Error)

	for i := range 20 {
		for _, id := range []int64{1, 2} {
			err := db.Save(&account{ID: id, Owner: "overwrite", Balance: int64(i)}).Error
			require.ErrorIs(t, err, hooks.ErrConflict, "attempt %d, row %d", i, id)
		}
	}
	for id, want := range map[int64]struct{ balance, version int64 }{1: {100, 0}, 2: {201, 1}} {
		got := loadAccount(t, e.db, id)
		require.Equal(t, "primary", got.Owner, "row %d", id)
		require.Equal(t, want.balance, got.Balance, "row %d", id)
		require.Equal(t, want.version, got.Version, "row %d", id)
	}

	// A never-read row absent everywhere is inserted on the primary only.
	require.NoError(t, db.Save(&account{ID: 3, Owner: "new"}).Error)
	require.Equal(t, "new", loadAccount(t, e.db, 3).Owner)
	require.Zero(t, count(t, replica, &account{}, "id = 3"))
	require.Equal(t, int64(1), count(t, replica, &account{}), "the replica is never written")
}
