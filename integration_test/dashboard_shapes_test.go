package integrationtest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/connstore/connstore/dashboard"
	"github.com/connstore/connstore/internal/overview"
	"github.com/connstore/connstore/repository"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// pageReads serves path from a dashboard on e's repository inside one
// transaction and returns the rows the request read from every table
// (pg_stat_xact_user_tables: sequential and index fetches).
func pageReads(t *testing.T, e *env, path string) int64 {
	t.Helper()
	var read int64
	require.NoError(t, e.db.Transaction(func(tx *gorm.DB) error {
		reads := func() (int64, error) {
			var v int64
			err := tx.Raw(`SELECT COALESCE(SUM(COALESCE(seq_tup_read, 0) + COALESCE(idx_tup_fetch, 0)), 0)
				FROM pg_stat_xact_user_tables`).Scan(&v).Error
			return v, err
		}
		start, err := reads()
		if err != nil {
			return err
		}
		h, err := dashboard.New(e.repo.WithTx(tx), dashboard.Options{})
		if err != nil {
			return err
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequestWithContext(ctx(t), http.MethodGet, path, nil))
		require.Equal(t, http.StatusOK, w.Code, "%s: %s", path, w.Body.String())
		end, err := reads()
		read = end - start
		return err
	}))
	return read
}

// requireDashboardBounded (called by TestAdminCallsBoundedAt1M on its
// journal of 1,000,000 operations: 20,000 attempted, 20,000 dead, the rest
// committed and waiting among retention's rows to judge) requires every
// dashboard page to read what it shows: the overview the 40,000 rows it
// counts and at most overview.Cap+1 rows to judge; a listing page a page's
// worth; one account's attempted operations at most its state's rows; one
// operation a row or two.
func requireDashboardBounded(t *testing.T, e *env, stats string, live int64) {
	t.Helper()
	_, err := e.repo.ListAccounts(ctx(t), repository.ListAccountsParams{Limit: 1})
	require.NoError(t, err)
	for _, tc := range []struct {
		path string
		most int64
	}{
		{"/", 2*live + overview.Cap + 1 + 100},
		{"/operations?state=attempted", 2 * 50},
		{"/operations?state=dead", 2 * 50},
		{"/operations?state=committed", 2 * 50},
		{"/operations?state=overdue", 2 * 50},
		{"/operations?state=attempted&owner=o5&connector=crm", 4 * 13 * 50},
		// Every attempted row is of account a0 here: its page is the
		// first 50; account a1 has none, so its page reads the state's
		// 20,000 rows and no more (never the committed journal).
		{"/operations?state=attempted&account=a0", 2 * 50},
		{"/operations?state=attempted&account=a1", live/2 + 100},
		{"/operation?caller=c1&op=op-50", 10},
		{"/sync?connector=crm", 2 * 50},
		{"/sync", 100},
		{"/accounts", 2 * 50},
	} {
		read := pageReads(t, e, tc.path)
		t.Logf("%s statistics: %s read %d rows", stats, tc.path, read)
		require.LessOrEqual(t, read, tc.most, "%s statistics: %s reads what it shows", stats, tc.path)
	}
}
