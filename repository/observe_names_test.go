package repository_test

import (
	"context"
	"errors"
	"iter"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/connstore/connstore/connstoretest"
	"github.com/connstore/connstore/models"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
)

// namesObserver records the method names calls begin with.
type namesObserver struct {
	mu    sync.Mutex
	begun []string
}

func (o *namesObserver) Begin(ctx context.Context, method string) (context.Context, func(error)) {
	o.mu.Lock()
	o.begun = append(o.begun, method)
	o.mu.Unlock()
	return ctx, func(error) {}
}

func (o *namesObserver) Observe(context.Context, repository.Event) {}

// take returns and clears what was recorded.
func (o *namesObserver) take() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	got := o.begun
	o.begun = nil
	return got
}

// unobserved are the exported methods that are plumbing, not calls: a
// transaction wrapper whose statements are the caller's, a constructor of a
// scoped repository, the pool's lifetime-long listener.
var unobserved = map[string]bool{"Transaction": true, "WithScopes": true, "ListenRecorded": true}

// TestEveryMethodReportsItsOwnName: every exported method taking a context
// begins exactly one observed call, under its own name, and never one of
// another public method's (no nested spans, no events attributed to an
// inner name). Each is called once with zero arguments (refused) by
// reflection, so a new method is covered without a new line here, and the
// paths that read or explain a row are driven with real rows.
func TestEveryMethodReportsItsOwnName(t *testing.T) {
	obs := &namesObserver{}
	s := connstoretest.SQLite(t, connstoretest.Options{Repository: repository.Options{Observer: obs}})
	ctx := t.Context()
	rv := reflect.ValueOf(s.Repo)
	ctxType := reflect.TypeFor[context.Context]()
	checked := 0
	for i := range rv.NumMethod() {
		m := rv.Type().Method(i)
		if m.Type.NumIn() < 2 || m.Type.In(1) != ctxType || unobserved[m.Name] {
			continue
		}
		args := []reflect.Value{reflect.ValueOf(ctx)}
		for j := 2; j < m.Type.NumIn(); j++ {
			args = append(args, reflect.Zero(m.Type.In(j)))
		}
		out := rv.Method(i).Call(args)
		if seq, ok := out[0].Interface().(iter.Seq2[repository.DueItem, error]); ok {
			seq(func(repository.DueItem, error) bool { return true })
		}
		require.Equal(t, []string{m.Name}, obs.take(), "method %s", m.Name)
		checked++
	}
	require.GreaterOrEqual(t, checked, 45, "every observed method was called")

	// The paths that read, replay or explain a row.
	in := repository.OperationInput{CallerDID: "c", OperationID: "op", NodeKey: "n", OwnerDID: "o", ConnectorName: "crm",
		Model: "m", Op: "create", AccountKey: "a", Target: "t", DeterministicEventID: "e", PayloadHash: "h",
		ReissueIntent: models.JSON(`{}`)}
	key := repository.OperationKey{CallerDID: "c", OperationID: "op"}
	wk := repository.WatchKey{OwnerDID: "o", ConnectorName: "crm", Model: "m", AccountKey: "a", SourceID: "s"}
	var watch *models.ProjectionWatch
	_, _, err := s.Repo.RecordOperation(ctx, in)
	require.NoError(t, err)
	obs.take()
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"RecordOperation", func() error { // the replay reads the stored row
			_, _, err := s.Repo.RecordOperation(ctx, in)
			return err
		}},
		{"CommitOperation", func() error { // refused: explained from the stored row
			_, err := s.Repo.CommitOperation(ctx, repository.CommitParams{Fence: repository.Fence{CallerDID: "c", OperationID: "op", LeaseToken: "x"}})
			return ignore(err, repository.ErrLeaseLost)
		}},
		{"RecordOperationFailure", func() error {
			_, err := s.Repo.RecordOperationFailure(ctx, repository.FailureParams{Fence: repository.Fence{CallerDID: "c", OperationID: "op", LeaseToken: "x"}, Kind: "network"})
			return ignore(err, repository.ErrLeaseLost)
		}},
		{"RequeueOperation", func() error {
			_, err := s.Repo.RequeueOperation(ctx, repository.RequeueParams{OperationKey: key})
			return ignore(err, repository.ErrWrongState)
		}},
		{"ArmWatch", func() error {
			var err error
			watch, err = s.Repo.ArmWatch(ctx, repository.ArmWatchParams{WatchKey: wk, DocumentID: "doc"})
			return err
		}},
		{"ListDueOperations", func() error {
			_, err := s.Repo.ListDueOperations(ctx, repository.DueParams{Now: s.Clock.At(time.Hour),
				ReadWinner: func(context.Context, string) (string, bool, error) { return "", false, nil }})
			return err
		}},
	} {
		require.NoError(t, c.call(), c.name)
		require.Equal(t, []string{c.name}, obs.take(), c.name)
	}
	digest := "d"
	_, err = s.Repo.RecordVerification(ctx, repository.VerificationParams{Watch: watch, Outcome: models.WatchVerified, VerifiedDigest: &digest})
	require.NoError(t, err)
	require.Equal(t, []string{"RecordVerification"}, obs.take())
}

// ignore turns the expected refusal into nil.
func ignore(err, want error) error {
	if errors.Is(err, want) {
		return nil
	}
	return err
}
