package integrationtest

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

const verifier = "verifier-9f8e7d6c5b4a"

func pendingInput(e *env, state string) repository.PendingAuthInput {
	return repository.PendingAuthInput{State: state, CodeVerifier: models.Secret(verifier), OwnerDID: "owner",
		ConnectorName: "crm", RedirectURI: "https://app.example/callback", Scopes: []string{"contacts.read", "contacts.write"},
		ExpiresAt: e.clock.At(10 * time.Minute)}
}

func consume(e *env, t *testing.T, state string) (*models.PendingAuth, error) {
	return e.repo.ConsumePendingAuth(ctx(t), repository.ConsumeParams{State: state, OwnerDID: "owner", ConnectorName: "crm"})
}

// TestPendingAuthConsumeOnce: a saved authorization is consumed once, by
// its owner and connector, with its verifier and scopes intact.
func TestPendingAuthConsumeOnce(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		_, err := e.repo.SavePendingAuth(ctx(t), pendingInput(e, "s1"))
		require.NoError(t, err)
		_, err = e.repo.SavePendingAuth(ctx(t), pendingInput(e, "s1"))
		require.ErrorIs(t, err, repository.ErrPendingAuthExists)

		_, err = e.repo.ConsumePendingAuth(ctx(t), repository.ConsumeParams{State: "s1", OwnerDID: "intruder", ConnectorName: "crm"})
		require.ErrorIs(t, err, repository.ErrNotFound, "bound to the owner it was created for")
		_, err = e.repo.ConsumePendingAuth(ctx(t), repository.ConsumeParams{State: "s1", OwnerDID: "owner", ConnectorName: "other"})
		require.ErrorIs(t, err, repository.ErrNotFound, "and to its connector")

		got, err := consume(e, t, "s1")
		require.NoError(t, err)
		require.Equal(t, verifier, got.CodeVerifier.Reveal())
		var granted []string
		require.NoError(t, got.Scopes.Decode(&granted))
		require.Equal(t, []string{"contacts.read", "contacts.write"}, granted)
		require.Equal(t, e.clock.Millis(), *got.ConsumedAt)
		_, err = consume(e, t, "s1")
		require.ErrorIs(t, err, repository.ErrNotFound, "single use")
		_, err = consume(e, t, "never-issued")
		require.ErrorIs(t, err, repository.ErrNotFound)
	})
}

// TestPendingAuthConcurrentConsumers: of many concurrent consumers of one
// state exactly one gets the record.
func TestPendingAuthConcurrentConsumers(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for round := range 10 {
			state := fmt.Sprintf("race-%d", round)
			_, err := e.repo.SavePendingAuth(ctx(t), pendingInput(e, state))
			require.NoError(t, err)
			var wg sync.WaitGroup
			results := make([]error, 8)
			for i := range results {
				wg.Go(func() {
					_, results[i] = e.repo.ConsumePendingAuth(context.Background(),
						repository.ConsumeParams{State: state, OwnerDID: "owner", ConnectorName: "crm"})
				})
			}
			wg.Wait()
			won := 0
			for _, err := range results {
				if err == nil {
					won++
				} else {
					require.ErrorIs(t, err, repository.ErrNotFound)
				}
			}
			require.Equal(t, 1, won, "round %d", round)
		}
	})
}

// TestPendingAuthExpiryAndPurge: an expired record is refused with its own
// error and left unconsumed; purges delete expired records in bounded
// batches and keep live ones.
func TestPendingAuthExpiryAndPurge(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		for i := range 5 {
			_, err := e.repo.SavePendingAuth(ctx(t), pendingInput(e, fmt.Sprintf("old-%d", i)))
			require.NoError(t, err)
		}
		e.clock.Advance(11 * time.Minute)
		live := pendingInput(e, "live")
		_, err := e.repo.SavePendingAuth(ctx(t), live)
		require.NoError(t, err)
		_, err = consume(e, t, "old-0")
		require.ErrorIs(t, err, repository.ErrPendingAuthExpired)
		require.Equal(t, int64(1), count(t, e.db, &models.PendingAuth{}, "state = ? AND consumed_at IS NULL", "old-0"))

		var deleted []int64
		for {
			n, err := e.repo.PurgePendingAuths(ctx(t), repository.PurgeParams{Before: e.clock.Now(), Limit: 2})
			require.NoError(t, err)
			deleted = append(deleted, n)
			if n < 2 {
				break
			}
		}
		require.Equal(t, []int64{2, 2, 1}, deleted)
		_, err = consume(e, t, "live")
		require.NoError(t, err, "a live record survives the purge")
		for _, bad := range []repository.PurgeParams{{Before: e.clock.Now(), Limit: 0}, {Before: time.UnixMilli(-5), Limit: 1}, {Limit: 1}} {
			_, err := e.repo.PurgePendingAuths(ctx(t), bad)
			require.ErrorIs(t, err, repository.ErrInvalidInput)
		}
	})
}

// TestPendingAuthVerifierNeverPrinted: the verifier appears in no error,
// no log record, no String and no JSON.
func TestPendingAuthVerifierNeverPrinted(t *testing.T) {
	t.Parallel()
	e := setup(t, sqlitekind)
	var logs strings.Builder
	repo, err := repository.New(e.db, repository.Options{NowFunc: e.clock.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	in := pendingInput(e, "s")
	row, err := repo.SavePendingAuth(ctx(t), in)
	require.NoError(t, err)
	_, dupErr := repo.SavePendingAuth(ctx(t), in)
	bad := in
	bad.RedirectURI = "not a uri"
	_, badErr := repo.SavePendingAuth(ctx(t), bad)
	asJSON, err := json.Marshal(row)
	require.NoError(t, err)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("row", "auth", row, "verifier", row.CodeVerifier)
	for _, text := range []string{dupErr.Error(), badErr.Error(), fmt.Sprint(row), fmt.Sprintf("%+v %#v %s %q %x", *row, *row,
		row.CodeVerifier, row.CodeVerifier, row.CodeVerifier), string(asJSON), logs.String()} {
		require.NotContains(t, text, verifier)
	}
	require.Contains(t, fmt.Sprint(row.CodeVerifier), "[redacted]")
}
