package migrations

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/go-gormigrate/gormigrate/v2"
	"gorm.io/gorm"
)

// Names of the journal's surrogate order.
const (
	// seqSequence numbers new operations: on PostgreSQL a sequence, the
	// column's default; on SQLite a one-row counter table a trigger reads.
	seqSequence = "kubun_connector_operation_seq"
	// fillSequence numbers the operations recorded before migration 0019,
	// counting down from -1, newest first (PostgreSQL; see FillSeq).
	fillSequence = "kubun_connector_operation_seq_fill"
	// unfilledIndex finds the operations FillSeq has still to number.
	unfilledIndex = "kubun_connector_operation_unfilled_idx"
)

// seqMigration gives the journal a surrogate order, seq: a BIGINT taken in
// record order, never the operation's identity (the seed's key (caller,
// operation id) stays the primary key and the API's key), and keys the
// listing indexes by it: by owner (owner, created_at, seq) instead of
// (owner, created_at, caller, operation id), by state (state, seq) instead
// of (state, caller, operation id). Every claim and every commit writes a
// new version of its row into both indexes; keyed by text they were most
// of the worker pool's server time beyond River's (BENCHMARKS.md, the
// breakdown).
//
// On PostgreSQL the column is added without a default for the rows already
// there (a metadata change, no rewrite of the table) and takes new values
// from a sequence. The rows recorded before are numbered by FillSeq in
// batches, each its own short transaction, after the migration's own
// transaction: numbered in the migration they would be one UPDATE of the
// whole journal holding every row's lock until it committed. They get
// negative numbers, counting down from the newest, so that every row keeps
// its place: older rows first, in (created_at, caller, operation id) order,
// the listings' order before. On SQLite (one writer, an embedded journal)
// they are numbered here, in the same order, and a trigger numbers each new
// row one past the greatest number (SQLite has no sequences, and its rowid
// may be renumbered by VACUUM).
func seqMigration() *gormigrate.Migration {
	return &gormigrate.Migration{
		ID: "connstore_0019_operation_seq",
		Migrate: func(tx *gorm.DB) error {
			if tx.Dialector.Name() != "postgres" {
				return execAll(tx, []string{
					`ALTER TABLE kubun_connector_operation ADD COLUMN seq BIGINT`,
					`UPDATE kubun_connector_operation SET seq = r.n - (SELECT COUNT(*) FROM kubun_connector_operation) - 1
						FROM (SELECT caller_did AS c, operation_id AS o,
							ROW_NUMBER() OVER (ORDER BY created_at, caller_did, operation_id) AS n FROM kubun_connector_operation) r
						WHERE caller_did = r.c AND operation_id = r.o`,
					`CREATE TABLE IF NOT EXISTS ` + seqSequence + ` (n BIGINT NOT NULL)`,
					`INSERT INTO ` + seqSequence + ` (n) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM ` + seqSequence + `)`,
					sqliteSeqTrigger,
					`DROP INDEX IF EXISTS kubun_connector_operation_state_key_idx`,
					`CREATE INDEX kubun_connector_operation_state_key_idx ON kubun_connector_operation (state, seq)`,
					`DROP INDEX IF EXISTS kubun_connector_operation_owner_idx`,
					`CREATE INDEX kubun_connector_operation_owner_idx ON kubun_connector_operation (owner_did, created_at, seq)`,
				})
			}
			return execAll(tx, []string{
				`ALTER TABLE kubun_connector_operation ADD COLUMN IF NOT EXISTS seq BIGINT`,
				`CREATE SEQUENCE IF NOT EXISTS ` + seqSequence + ` OWNED BY kubun_connector_operation.seq`,
				`ALTER TABLE kubun_connector_operation ALTER COLUMN seq SET DEFAULT nextval('` + seqSequence + `')`,
				`CREATE SEQUENCE IF NOT EXISTS ` + fillSequence + ` INCREMENT BY -1 MAXVALUE -1 START WITH -1
					OWNED BY kubun_connector_operation.seq`,
				// FillSeq's way to the rows it has still to number: empty once
				// they are, and new rows never enter it.
				`CREATE INDEX IF NOT EXISTS ` + unfilledIndex + ` ON kubun_connector_operation
					(created_at, caller_did, operation_id) WHERE seq IS NULL`,
				`DROP INDEX IF EXISTS kubun_connector_operation_state_key_idx`,
				`CREATE INDEX kubun_connector_operation_state_key_idx ON kubun_connector_operation (state, seq)`,
				`DROP INDEX IF EXISTS kubun_connector_operation_owner_idx`,
				`CREATE INDEX kubun_connector_operation_owner_idx ON kubun_connector_operation (owner_did, created_at, seq)`,
			})
		},
		Rollback: func(tx *gorm.DB) error {
			restore := []string{
				`DROP INDEX IF EXISTS kubun_connector_operation_state_key_idx`,
				`DROP INDEX IF EXISTS kubun_connector_operation_owner_idx`,
			}
			if tx.Dialector.Name() == "postgres" {
				restore = append(restore, `DROP INDEX IF EXISTS `+unfilledIndex,
					`ALTER TABLE kubun_connector_operation DROP COLUMN seq`) // drops the sequences it owns
			} else {
				restore = append(restore, `DROP TRIGGER IF EXISTS kubun_connector_operation_seq_ins`,
					`DROP TABLE IF EXISTS `+seqSequence, `ALTER TABLE kubun_connector_operation DROP COLUMN seq`)
			}
			return execAll(tx, append(restore,
				`CREATE INDEX kubun_connector_operation_state_key_idx
					ON kubun_connector_operation (state, caller_did, operation_id)`,
				`CREATE INDEX kubun_connector_operation_owner_idx
					ON kubun_connector_operation (owner_did, created_at, caller_did, operation_id)`))
		},
	}
}

// sqliteSeqTrigger numbers a row recorded without a seq from a one-row
// counter table, SQLite's stand-in for a sequence (SQLite has none, and the
// journal's rowid may be renumbered by VACUUM): the counter starts at 0, so
// new rows take 1, 2, … above the negative numbers the migration gave the
// rows before it, and 0 is no row's (a cursor can tell a missing number).
// Counting in a table of its own rather than one past MAX(seq) needs no
// index on seq, which every claim and commit would have to write; SQLite's
// single writer makes the count and the write one step.
const sqliteSeqTrigger = `CREATE TRIGGER IF NOT EXISTS kubun_connector_operation_seq_ins
	AFTER INSERT ON kubun_connector_operation FOR EACH ROW WHEN NEW.seq IS NULL
	BEGIN
		UPDATE ` + seqSequence + ` SET n = n + 1;
		UPDATE kubun_connector_operation SET seq = (SELECT n FROM ` + seqSequence + `)
		WHERE caller_did = NEW.caller_did AND operation_id = NEW.operation_id;
	END`

// FillSeqBatch is how many rows one of FillSeq's transactions numbers. A
// batch holds its rows' locks while it writes every index entry of each
// (seq keys two of them, so no update is HOT): an application's write of
// one of them waits that long. At 5,000 rows a batch held a writer for
// over 5 s on a loaded server (the whole test suite beside it); at 1,000
// the longest wait there was 1 s, and the fill of 1M rows took 44 s
// instead of 24 s on an idle server. 2,000 is between: adoption runs once,
// writers run all the time.
const FillSeqBatch = 2000

// fillLockNamespace is the advisory lock key's first half for FillSeq's
// batches (the migration lock's namespace is advisoryNamespace).
const fillLockNamespace = advisoryNamespace + 19

// FillSeq numbers the journal's rows recorded before migration 0019 (on
// PostgreSQL; SQLite's are numbered by the migration), FillSeqBatch rows a
// transaction, newest first, each batch below the last: older rows get
// lower numbers, in (created_at, caller, operation id) order. Migrate calls
// it after its transaction, so an instance that migrated serves listings
// only once every row is numbered; instances starting at once fill side by
// side, their batches serialized by a transaction-scoped advisory lock (so
// it works behind a pooler in transaction mode). A batch holds the locks
// of its own rows only, for as long as it takes to write them: writers of
// other rows never wait, a writer of one of its rows waits for one batch.
// The index of the rows still to number lives only as long as there are
// such rows: the batch that finds none drops it (with a short lock
// timeout, so a long transaction on the journal delays the drop to the
// next FillSeq rather than queueing claims behind it), and with the index
// gone FillSeq is one catalog lookup. It returns how many rows it
// numbered.
func FillSeq(ctx context.Context, db *gorm.DB) (int64, error) {
	if db.Dialector.Name() != "postgres" {
		return 0, nil
	}
	var total int64
	var below *fillKey // the last batch's lowest key: the next batch's bound
	for done := false; !done; {
		var n int64
		err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Exec("SELECT pg_advisory_xact_lock(?, hashtext(current_schema()))", fillLockNamespace).Error; err != nil {
				return fmt.Errorf("take fill lock: %w", err)
			}
			var unfilled *string
			if err := tx.Raw(`SELECT CAST(to_regclass(?) AS TEXT)`, unfilledIndex).Scan(&unfilled).Error; err != nil {
				return fmt.Errorf("find %s: %w", unfilledIndex, err)
			}
			if unfilled == nil {
				done = true
				return nil
			}
			keys, err := fillBatch(tx, below)
			if err != nil {
				return err
			}
			if len(keys) == 0 {
				return nil
			}
			// The batch takes its numbers from the fill sequence at once
			// (its next value, then the sequence moved past the rest) and
			// gives them out in the pick's order, newest first.
			var top int64
			if err := tx.Raw(`SELECT nextval('` + fillSequence + `')`).Scan(&top).Error; err != nil {
				return err
			}
			if err := tx.Exec(`SELECT setval('`+fillSequence+`', ?)`, top-int64(len(keys)-1)).Error; err != nil {
				return err
			}
			rows := make([]fillRow, len(keys))
			for i, k := range keys {
				rows[i] = fillRow{C: k.C, O: k.O, S: top - int64(i)}
			}
			list, err := json.Marshal(rows)
			if err != nil {
				return err
			}
			// Only key lookups: the planner takes the list's rows for a
			// handful and finds each by the primary key, so the batch
			// locks its own rows and no other. Rows a writer numbered
			// meanwhile (none should: the column's default numbers new
			// rows) are skipped.
			res := tx.Exec(`UPDATE kubun_connector_operation t SET seq = v.s
				FROM json_to_recordset(CAST(? AS json)) AS v(c text, o text, s bigint)
				WHERE t.caller_did = v.c AND t.operation_id = v.o AND t.seq IS NULL`, string(list))
			n = res.RowsAffected
			last := keys[len(keys)-1]
			below = &last
			return res.Error
		})
		if err != nil {
			return total, fmt.Errorf("fill operation seq: %w", err)
		}
		total += n
		if n == 0 && !done {
			if below != nil {
				// Nothing below the bound: one more pass from the top
				// finds any row left above it (another instance's batch
				// may have moved on meanwhile) before the index goes.
				below = nil
				continue
			}
			return total, dropUnfilled(ctx, db)
		}
	}
	return total, nil
}

// fillKey is a journal row's place in FillSeq's order.
type fillKey struct {
	CA int64
	C  string
	O  string
}

// fillRow is a row's key and the number FillSeq gives it.
type fillRow struct {
	C string `json:"c"`
	O string `json:"o"`
	S int64  `json:"s"`
}

// fillBatch reads the keys of the next FillSeqBatch rows to number, newest
// first, below the last batch's lowest key when there was one: one range of
// the index of rows still to number, which never walks over the entries of
// the rows numbered before (vacuum may not have removed them yet).
func fillBatch(tx *gorm.DB, below *fillKey) ([]fillKey, error) {
	q := `SELECT created_at AS ca, caller_did AS c, operation_id AS o FROM kubun_connector_operation WHERE seq IS NULL`
	var vars []any
	if below != nil {
		q += ` AND (created_at, caller_did, operation_id) < (?, ?, ?)`
		vars = append(vars, below.CA, below.C, below.O)
	}
	q += ` ORDER BY created_at DESC, caller_did DESC, operation_id DESC LIMIT ?`
	vars = append(vars, FillSeqBatch)
	var keys []fillKey
	if err := tx.Raw(q, vars...).Scan(&keys).Error; err != nil {
		return nil, fmt.Errorf("pick rows to number: %w", err)
	}
	return keys, nil
}

// dropUnfilled drops the index of the rows still to number once there are
// none. A lock timeout leaves it for the next FillSeq: it is empty, and no
// new row enters it.
func dropUnfilled(ctx context.Context, db *gorm.DB) error {
	err := db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Exec("SET LOCAL lock_timeout = '2s'").Error; err != nil {
			return err
		}
		return tx.Exec(`DROP INDEX IF EXISTS ` + unfilledIndex).Error
	})
	var pgErr interface{ SQLState() string }
	if errors.As(err, &pgErr) && pgErr.SQLState() == "55P03" { // lock_not_available
		return nil
	}
	if err != nil {
		return fmt.Errorf("drop %s: %w", unfilledIndex, err)
	}
	return nil
}
