package main

import (
	"context"
	"sort"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/jackc/pgx/v5"
)

// cas compares UpdateSyncProgress on one row, one writer, with the same
// SELECT + guarded UPDATE written on raw pgx, in paired rounds: as a
// repository is configured by default (it remembers its last write, so a
// sole writer updates in one round trip), and with that cache off (read +
// write, as the anchor does).
func cas(ctx context.Context, dsn string, rep *report) error {
	if err := casCompare(ctx, dsn, rep, repositoryOptions(), "UpdateSyncProgress, one row, one writer (ops/s)"); err != nil {
		return err
	}
	off := repositoryOptions()
	off.ProgressCache = -1
	return casCompare(ctx, dsn, rep, off, "UpdateSyncProgress, progress cache off: read + write (ops/s)")
}

func casCompare(ctx context.Context, dsn string, rep *report, opts repository.Options, name string) error {
	_, repo, sdsn, err := store(ctx, dsn, opts)
	if err != nil {
		return err
	}
	if err := repo.SetSyncState(ctx, repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"}, repository.SyncStateInput{LastSyncedAt: "t", Status: models.SyncStatusIdle}); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, sdsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	doc := models.JSON(`{"page":1}`)
	ours := func() error {
		return repo.UpdateSyncProgress(ctx, repository.UpdateSyncProgressParams{
			Key: repository.ConnectorKey{OwnerDID: "o", ConnectorName: "crm"},
			Recompute: func(context.Context, *repository.SyncProgressCurrent) (repository.SyncProgressResult, error) {
				return repository.SyncProgressResult{Checkpoint: doc, LastSyncedAt: "t", EntityCount: 1}, nil
			}})
	}
	raw := func() error {
		var (
			checkpoint, recovery *string
			version              int64
			incarnation          string
		)
		err := conn.QueryRow(ctx, `SELECT checkpoint, recovery, version, incarnation FROM kubun_connector_sync_state
			WHERE connector_name = $1 AND owner_did = $2 LIMIT 1`, "crm", "o").Scan(&checkpoint, &recovery, &version, &incarnation)
		if err != nil {
			return err
		}
		_, err = conn.Exec(ctx, `UPDATE kubun_connector_sync_state SET checkpoint = $1, last_synced_at = $2,
			entity_count = $3, error = $4, recovery = $5, version = $6
			WHERE connector_name = $7 AND owner_did = $8 AND version = $9 AND incarnation = $10`,
			string(doc), "t", 1, nil, nil, version+1, "crm", "o", version, incarnation)
		return err
	}
	var oursRate, rawRate, rounds []float64
	for i := range casRounds {
		pair := [2]float64{}
		for _, k := range alternate(i) { // who goes first alternates
			rate, err := opsPerSecond([]func() error{ours, raw}[k], 700*time.Millisecond)
			if err != nil {
				return err
			}
			pair[k] = rate
		}
		oursRate, rawRate, rounds = append(oursRate, pair[0]), append(rawRate, pair[1]), append(rounds, pair[0]/pair[1])
	}
	rep.add(row{group: "cas", name: name, ours: median(oursRate),
		theirs: median(rawRate), higherBetter: true, anchor: "raw pgx SELECT + guarded UPDATE", target: 0.9, rounds: rounds})
	return nil
}

// casRounds is how many paired rounds the CAS comparison runs.
const casRounds = 15

// alternate is the order of a paired round's two sides: connstore first in
// even rounds, the anchor first in odd ones.
func alternate(round int) []int {
	if round%2 == 0 {
		return []int{0, 1}
	}
	return []int{1, 0}
}

// opsPerSecond runs fn repeatedly for about d.
func opsPerSecond(fn func() error, d time.Duration) (float64, error) {
	start, n := time.Now(), 0
	for time.Since(start) < d {
		if err := fn(); err != nil {
			return 0, err
		}
		n++
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	return s[len(s)/2]
}

// repositoryOptions are the benchmark's repository options: defaults.
func repositoryOptions() repository.Options { return repository.Options{} }
