package worker

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// TestLeaseBound (no database): while heartbeats fail, a handler whose
// lease runs out before the next heartbeat is due is cancelled with
// errLeaseLost and counted once; one whose lease outlasts it keeps running,
// and a finished one (its result being recorded) is never touched.
func TestLeaseBound(t *testing.T) {
	now := time.Unix(1000, 0)
	next := now.Add(time.Second) // when the next heartbeat is due
	p := &Pool{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	r := &run{pool: p, cfg: &p.cfg, held: map[repository.Fence]*job{}}
	jobs := map[string]*job{}
	for _, tc := range []struct {
		name     string
		expires  time.Time
		finished bool
	}{
		{"runs out before", next.Add(-time.Millisecond), false},
		{"runs out at", next, false},
		{"outlasts", next.Add(time.Millisecond), false},
		{"finished", now, true},
	} {
		_, cancel := context.WithCancelCause(context.Background())
		j := &job{fence: repository.Fence{CallerDID: "c", OperationID: tc.name, LeaseToken: "t"}, cancel: cancel,
			expires: tc.expires, finished: tc.finished}
		r.held[j.fence] = j
		jobs[tc.name] = j
		t.Cleanup(func() { cancel(nil) })
	}
	var fences []repository.Fence
	for f := range r.held {
		fences = append(fences, f)
	}
	r.expire(fences, next)
	r.expire(fences, next) // a second failed heartbeat counts nothing twice
	for name, lost := range map[string]bool{"runs out before": true, "runs out at": true, "outlasts": false, "finished": false} {
		require.Equal(t, lost, jobs[name].lost, name)
	}
	require.Equal(t, int64(2), p.Stats().LeaseLost)
}

// TestLeaseBoundCancelsWithCause: the cancelled handler's context says why.
func TestLeaseBoundCancelsWithCause(t *testing.T) {
	p := &Pool{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	r := &run{pool: p, cfg: &p.cfg, held: map[repository.Fence]*job{}}
	ctx, cancel := context.WithCancelCause(context.Background())
	f := repository.Fence{CallerDID: "c", OperationID: "op", LeaseToken: "t"}
	r.held[f] = &job{fence: f, cancel: cancel, expires: time.Unix(1, 0)}
	r.expire([]repository.Fence{f}, time.Unix(2, 0))
	require.True(t, errors.Is(context.Cause(ctx), errLeaseLost))
}

// TestConfigRefusesImpossibleLeases: a heartbeat no shorter than the lease
// could never renew it in time, and one over half the lease loses it when
// a single heartbeat is late.
func TestConfigRefusesImpossibleLeases(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lease, hb time.Duration
		ok        bool
	}{
		{"heartbeat shorter", time.Minute, 20 * time.Second, true},
		{"heartbeat half the lease", time.Minute, 30 * time.Second, true},
		{"heartbeat just over half", 100 * time.Millisecond, 51 * time.Millisecond, false},
		{"heartbeat just under the lease", 100 * time.Millisecond, 99 * time.Millisecond, false},
		{"heartbeat equal", time.Minute, time.Minute, false},
		{"heartbeat longer", time.Second, 2 * time.Second, false},
		{"negative lease", -time.Second, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Config{Handler: func(context.Context, *models.Operation) Result { return Result{} },
				LeaseFor: tc.lease, HeartbeatEvery: tc.hb}.withDefaults()
			if tc.ok {
				require.NoError(t, err)
			} else {
				require.ErrorIs(t, err, repository.ErrInvalidInput)
			}
		})
	}
}
