// Package dashboard is an operator's web dashboard for a connstore
// repository: one http.Handler, server-rendered with html/template, its
// CSS embedded, no JavaScript and nothing fetched from elsewhere (it works
// on an air-gapped network), each page with a JSON twin (?format=json, the
// same data).
//
// Mount it under any prefix of the host's mux, behind the host's own
// middleware (authentication is the host's):
//
//	h, err := dashboard.New(repo, dashboard.Options{BasePath: "/connstore"})
//	mux.Handle("/connstore/", http.StripPrefix("/connstore", h))
//
// Reads only call the repository's admin API (CountOperations,
// ListOperationsByState, GetOperation, ListAccounts, ListSyncStates,
// ReadOverview), each bounded by an index or a row cap: nothing the
// dashboard reads holds a lock a claim or a commit waits on. Actions
// (requeue, cancel, pause and resume an account, set a sync status) are
// POST forms through the same calls as the CLI, allowed only when
// Options.Authorize says so: without it the dashboard is read-only.
package dashboard
