package integrationtest

import (
	"testing"
	"time"

	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

func watchKey(source string) repository.WatchKey {
	return repository.WatchKey{OwnerDID: "owner", ConnectorName: "crm", Model: "contact", AccountKey: "acct", SourceID: source}
}

func TestArmWatchAndRearm(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		w, err := e.repo.ArmWatch(ctx(t), repository.ArmWatchParams{WatchKey: watchKey("s1"), DocumentID: "doc1"})
		require.NoError(t, err)
		require.Equal(t, models.WatchPendingVerification, w.VerificationStatus)
		require.Equal(t, e.clock.Millis(), *w.NextAttemptAt)
		require.Equal(t, int64(0), w.Version)

		_, err = e.repo.RecordVerification(ctx(t), repository.VerificationParams{Watch: w,
			Outcome: models.WatchVerified, VerifiedDigest: models.StrPtr("d1")})
		require.NoError(t, err)

		e.clock.Advance(time.Second)
		later := e.clock.At(time.Minute)
		w, err = e.repo.ArmWatch(ctx(t), repository.ArmWatchParams{WatchKey: watchKey("s1"), DocumentID: "doc2", VerifyAt: later})
		require.NoError(t, err)
		require.Equal(t, "doc2", w.DocumentID)
		require.Equal(t, models.WatchPendingVerification, w.VerificationStatus)
		require.Equal(t, later.UnixMilli(), *w.NextAttemptAt)
		require.Equal(t, int64(2), w.Version, "re-arm bumps version")
		require.Equal(t, "d1", *w.VerifiedStateDigest, "watermark kept")
		require.Equal(t, int64(1), count(t, e.db, &models.ProjectionWatch{}))
	})
}

func TestRecordVerificationOutcomes(t *testing.T) {
	t.Parallel()
	forEachDB(t, func(t *testing.T, e *env) {
		w, err := e.repo.ArmWatch(ctx(t), repository.ArmWatchParams{WatchKey: watchKey("s1"), DocumentID: "doc1"})
		require.NoError(t, err)
		stale := *w

		next := e.clock.At(time.Minute)
		w, err = e.repo.RecordVerification(ctx(t), repository.VerificationParams{Watch: w,
			Outcome: models.WatchPendingVerification, NextAttemptAt: next, Repaired: true,
			ObservedWinnerDigest: models.StrPtr("w1")})
		require.NoError(t, err)
		require.Equal(t, int64(1), w.VerificationAttempts)
		require.Equal(t, int64(1), w.RepairGeneration)
		require.Equal(t, next.UnixMilli(), *w.NextAttemptAt)
		require.Equal(t, "w1", *w.ObservedWinnerDigest)

		// A writer holding the old version loses, and changes nothing.
		_, err = e.repo.RecordVerification(ctx(t), repository.VerificationParams{Watch: &stale,
			Outcome: models.WatchVerified, VerifiedDigest: models.StrPtr("x")})
		require.ErrorIs(t, err, repository.ErrConflict)

		w, err = e.repo.RecordVerification(ctx(t), repository.VerificationParams{Watch: w,
			Outcome: models.WatchRepairFailed, ObservedWinnerDigest: models.StrPtr("w2")})
		require.NoError(t, err)
		require.Equal(t, models.WatchRepairFailed, w.VerificationStatus)
		require.Nil(t, w.NextAttemptAt, "exhausted: schedule cleared")
		require.Equal(t, int64(2), w.VerificationAttempts)
		require.Equal(t, int64(1), w.RepairGeneration)
		require.Nil(t, w.VerifiedStateDigest)

		w, err = e.repo.RecordVerification(ctx(t), repository.VerificationParams{Watch: w,
			Outcome: models.WatchVerified, VerifiedDigest: models.StrPtr("d3")})
		require.NoError(t, err)
		require.Equal(t, "d3", *w.VerifiedStateDigest)
		require.Equal(t, int64(0), w.VerificationAttempts)
		require.Nil(t, w.NextAttemptAt)
		require.Equal(t, int64(3), w.Version)

		for name, bad := range map[string]repository.VerificationParams{
			"nil watch":          {Outcome: models.WatchVerified, VerifiedDigest: models.StrPtr("d")},
			"unknown outcome":    {Watch: w, Outcome: "maybe"},
			"verified no digest": {Watch: w, Outcome: models.WatchVerified},
			"pending no time":    {Watch: w, Outcome: models.WatchPendingVerification},
			"failed no observed": {Watch: w, Outcome: models.WatchRepairFailed},
		} {
			_, err := e.repo.RecordVerification(ctx(t), bad)
			require.ErrorIs(t, err, repository.ErrInvalidInput, name)
		}
		got, err := e.repo.GetWatch(ctx(t), watchKey("s1"))
		require.NoError(t, err)
		require.Equal(t, *w, *got, "bad input changed nothing")
		_, err = e.repo.ArmWatch(ctx(t), repository.ArmWatchParams{WatchKey: watchKey(""), DocumentID: "d"})
		require.ErrorIs(t, err, repository.ErrInvalidInput)
	})
}
