package store

import (
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// The CAS statements of the sync state, written out for repositories
// without extra scopes. The write is guarded on everything a recompute saw:
// version and incarnation, and the stored checkpoint, recovery and error
// too, because SetSyncState (the seed's upsert) rewrites those without bumping
// the version, and a write guarded on the version alone would undo its
// reset. They are plain statements, never named prepared ones: those break
// behind PgBouncer's transaction pooling.
const (
	casGuard = `connector_name = ? AND owner_did = ? AND version = ? AND incarnation = ?
		AND checkpoint IS NOT DISTINCT FROM ? AND recovery IS NOT DISTINCT FROM ?
		AND error IS NOT DISTINCT FROM ?`
)

// CASReadColumns are the columns a progress attempt reads, in the order
// ReadCAS scans them. Both forms of the read (ReadCAS and the scoped
// builder) read exactly these.
var CASReadColumns = []string{"checkpoint", "recovery", "error", "version", "incarnation"}

// casRead is the fast form of the read.
var casRead = "SELECT " + strings.Join(CASReadColumns, ", ") +
	" FROM kubun_connector_sync_state WHERE connector_name = ? AND owner_did = ? LIMIT 1"

// CASColumns are the columns a progress write sets, besides the version.
// Both forms of the write (WriteCAS and the scoped builder with CASGuard)
// set exactly these.
var CASColumns = []string{"checkpoint", "last_synced_at", "entity_count", "error", "recovery"}

// casWrite is the fast form of the write: SET every CASColumns entry, then
// the version, WHERE casGuard.
var casWrite = "UPDATE kubun_connector_sync_state SET " + strings.Join(CASColumns, " = ?, ") +
	" = ?, version = ? WHERE " + casGuard

// CASGuard is the write's guard for the builder: connector, owner, version,
// incarnation, checkpoint, recovery and error, in that order.
func CASGuard(guard ...any) clause.Expr { return clause.Expr{SQL: casGuard, Vars: guard} }

// CAS is the fast form of a progress attempt's two statements, rendered
// for one database (Fixed): the CAS is the hot path, and gorm's clause
// building and Scan's reflection were most of its cost.
type CAS struct{ read, write Fixed }

// NewCAS renders the CAS statements for db's dialect.
func NewCAS(db *gorm.DB) CAS { return CAS{read: Render(db, casRead), write: Render(db, casWrite)} }

// Read reads the CAS columns of one sync state into dest (checkpoint,
// recovery, error, version, incarnation) through db's callbacks, so the
// application's logger and tracer see it; found is false without a row.
// Scanned by hand, not by gorm's reflection.
func (c CAS) Read(db *gorm.DB, connector, owner string, dest ...any) (found bool, err error) {
	rows, err := c.read.Rows(db, connector, owner)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return false, rows.Err()
	}
	return true, rows.Scan(dest...)
}

// Write runs the fast write: values are CASColumns' then the version's,
// guard is CASGuard's. The returned handle carries the error and the rows
// changed.
func (c CAS) Write(db *gorm.DB, values, guard []any) *gorm.DB {
	return c.write.Exec(db, append(append(make([]any, 0, len(values)+len(guard)), values...), guard...)...)
}

// KeyIs is one sync state, by connector and owner.
func KeyIs(connector, owner string) clause.Expr {
	return clause.Expr{SQL: "connector_name = ? AND owner_did = ?", Vars: []any{connector, owner}}
}

// OwnerAfter is a sync state of an owner after owner in key order.
func OwnerAfter(owner string) clause.Expr {
	return clause.Expr{SQL: "owner_did > ?", Vars: []any{owner}}
}

// StatusUnchanged guards a status write on everything it read: key,
// version, incarnation, status and error (NULL-safe).
func StatusUnchanged(connector, owner string, version int64, incarnation, status string, errText *string) clause.Expr {
	return clause.Expr{SQL: "connector_name = ? AND owner_did = ? AND version = ? AND incarnation = ? AND status = ? " +
		"AND error IS NOT DISTINCT FROM ?", Vars: []any{connector, owner, version, incarnation, status, errText}}
}
