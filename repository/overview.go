package repository

import (
	"context"

	"github.com/connstore/connstore/internal/overview"
	"gorm.io/gorm"
)

// Overview is the summary of the tables besides the journal: sync states
// by status, watches due, retention's rows to judge, sweeps' checkpoints.
type Overview = overview.Summary

// OverviewParams says what ReadOverview reads.
type OverviewParams struct {
	// SyncStatesOnly reads the sync states' counts and nothing else.
	SyncStatesOnly bool
}

// ReadOverview reads the Overview, within the repository's scopes. Each
// backlog count stops at overview.Cap rows (shown as "at least"), so its
// cost is bounded whatever the backlog; the per-connector summaries read
// one row per sync state and per checkpoint. It may be served by a read
// replica. The journal's own counts are CountOperations'.
func (r *Repository) ReadOverview(ctx context.Context, p OverviewParams) (_ *Overview, err error) {
	ctx, end := r.start(ctx, "ReadOverview")
	defer end(&err)
	return overview.Read(func() *gorm.DB { return r.conn(ctx) }, func() *gorm.DB { return r.base(ctx) }, r.now(), p.SyncStatesOnly)
}
