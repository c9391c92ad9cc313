// Package overview reads the dashboard's summary of the tables besides
// the journal: sync states by status, projection watches due, retention's
// rows to judge and sweeps' checkpoints. The journal's own counts are
// CountOperations'.
//
// Every read is bounded by what it shows. The counts a backlog can make
// large (watches due, rows to judge) stop at Cap rows, read in an index's
// order, so at a million rows they cost what Cap costs; the per-connector
// summaries (sync states, checkpoints) read one row per (connector, owner)
// or per partition, which is the size of what they summarize, through the
// tables' primary keys, and return at most MaxGroups groups.
package overview

import (
	"fmt"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// Cap is the most rows a backlog count reads: a larger backlog is shown as
// "at least Cap".
const Cap = 10000

// MaxGroups is the most groups a summary returns.
const MaxGroups = 500

// Count is a bounded count: N rows, or at least N when AtLeast.
type Count struct {
	N       int64 `json:"n"`
	AtLeast bool  `json:"at_least,omitempty"`
}

// SyncCount is the number of one connector's sync states in one status.
type SyncCount struct {
	ConnectorName string `json:"connector_name"`
	Status        string `json:"status"`
	Count         int64  `json:"count"`
}

// Checkpoints summarizes one connector's sweep checkpoints: how many
// partitions have one, and when the stalest and the latest moved.
type Checkpoints struct {
	ConnectorName string `json:"connector_name"`
	Partitions    int64  `json:"partitions"`
	// OldestMs and NewestMs are the earliest and latest updated_at (epoch
	// ms, the repository's clock).
	OldestMs int64 `json:"oldest_updated_at"`
	NewestMs int64 `json:"newest_updated_at"`
}

// Summary is the overview of the tables besides the journal.
type Summary struct {
	SyncStates []SyncCount `json:"sync_states"`
	// WatchesDue is the projection watches whose scheduled verification
	// is due now.
	WatchesDue Count `json:"watches_due"`
	// ToJudge is retention's backlog: finished operations no pass has
	// judged since they finished or changed.
	ToJudge     Count         `json:"retention_to_judge"`
	Checkpoints []Checkpoints `json:"sweep_checkpoints"`
	// More is set when a summary had more than MaxGroups groups.
	More bool `json:"more,omitempty"`
}

// Read reads the summary through conn: a new handle for each statement,
// bound to the call's context with the repository's scopes (owner_did and
// connector_name, which every one of these tables has), so a scoped
// repository sees its own rows only. plain is the same without scopes,
// for the outer statement of a bounded count (whose inner one carries
// them).
// With syncOnly it reads the sync states' counts and nothing else.
func Read(conn, plain func() *gorm.DB, now time.Time, syncOnly bool) (*Summary, error) {
	var s Summary
	err := conn().Model(&models.SyncState{}).Select("connector_name, status, COUNT(*) AS count").
		Group("connector_name, status").Order("connector_name, status").Limit(MaxGroups + 1).Scan(&s.SyncStates).Error
	if err != nil {
		return nil, fmt.Errorf("count sync states: %w", err)
	}
	if len(s.SyncStates) > MaxGroups {
		s.SyncStates, s.More = s.SyncStates[:MaxGroups], true
	}
	if syncOnly {
		return &s, nil
	}
	if s.WatchesDue, err = bounded(plain(), conn().Model(&models.ProjectionWatch{}).Scopes(scopes.WatchScheduled(now))); err != nil {
		return nil, fmt.Errorf("count watches due: %w", err)
	}
	if s.ToJudge, err = bounded(plain(), conn().Model(&models.RetentionPending{})); err != nil {
		return nil, fmt.Errorf("count rows to judge: %w", err)
	}
	err = conn().Model(&models.SweepCheckpoint{}).
		Select("connector_name, COUNT(*) AS partitions, MIN(updated_at) AS oldest_ms, MAX(updated_at) AS newest_ms").
		Group("connector_name").Order("connector_name").Limit(MaxGroups + 1).Scan(&s.Checkpoints).Error
	if err != nil {
		return nil, fmt.Errorf("summarize sweep checkpoints: %w", err)
	}
	if len(s.Checkpoints) > MaxGroups {
		s.Checkpoints, s.More = s.Checkpoints[:MaxGroups], true
	}
	return &s, nil
}

// bounded counts q's rows up to Cap: the count of a subquery that stops at
// Cap+1 rows, so a backlog of a million costs what Cap does. The outer
// statement runs on plain: gorm would apply the scopes of a handle that has
// them to it too, where the subquery's columns are not.
func bounded(plain, q *gorm.DB) (Count, error) {
	var n int64
	if err := plain.Raw("SELECT COUNT(*) FROM (?) b", q.Select("1").Limit(Cap+1)).Scan(&n).Error; err != nil {
		return Count{}, err
	}
	if n > Cap {
		return Count{N: Cap, AtLeast: true}, nil
	}
	return Count{N: n}, nil
}
