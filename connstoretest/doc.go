// Package connstoretest gives an application's tests what connstore's own
// tests use: a migrated store on a temporary SQLite file or in a fresh
// PostgreSQL schema, a manual clock, deterministic id sources, and WorkOne,
// which runs one worker-pool handler against a recorded operation through
// the real pool and returns what the store recorded.
//
//	func TestSync(t *testing.T) {
//		s := connstoretest.SQLite(t, connstoretest.Options{})
//		op, _ := connstoretest.WorkOne(t, s, in, myHandler)
//		require.Equal(t, models.OperationCommitted, op.State)
//	}
//
// Every helper fails the test (t.Fatal) on a setup error and cleans up
// after it (t.Cleanup); none of them keeps state between tests.
package connstoretest
