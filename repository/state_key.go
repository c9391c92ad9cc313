package repository

import (
	"slices"

	"github.com/connstore/connstore/internal/store"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// byStateKey narrows q to the operations in states, to be read in key
// order within a state. Without committed among the states the state-key
// index serves them, and q is made able to use it (store.StateKeyed, its
// predicate; see dialect.IndexPredicate): without it SQLite would read the
// attempted or dead rows by the primary key, past every committed one.
func (r *Repository) byStateKey(q *gorm.DB, states ...string) *gorm.DB {
	q = q.Scopes(scopes.State(states...))
	if !slices.Contains(states, models.OperationCommitted) {
		q = r.dialect.IndexPredicate(q, store.StateKeyed)
	}
	return q
}
