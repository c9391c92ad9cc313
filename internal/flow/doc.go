// Package flow is the flow control of provider accounts: which due
// operations a claim may lease when accounts have limits (a cap on live
// leases, a rate of starts with a burst, a pause), shared fairly among the
// accounts with due work, exactly, across every instance on one database.
//
// An account is an operation's (connector_name, account_key); a row with
// account_key "" is its connector's, whose limits sit above all its
// accounts. Operations of an account under flow control carry flow = true
// and are claimed through indexes of their own (migration 0020); the plain
// claim never reads them.
//
// Exactness: a claim leases an account's operations only while it holds
// the account's row (taken FOR UPDATE SKIP LOCKED, so claims of different
// instances serve different accounts at once and never wait for each
// other's accounts), and a connector's row while it counts against the
// connector's limits (FOR UPDATE, all of one claim's connectors in name
// order, so two claims cannot wait for each other: deadlock-free). What it
// counts (live leases, the rate's theoretical arrival time) and what it
// leases are then one serial step per account.
//
// Cost: a claim reads the accounts whose eligible_at has come (an index
// range in eligible_at order: round-robin, the longest waiting first), and
// of each only the rows it leases. An account that is paused, at its cap,
// out of tokens or without due work has an eligible_at in the future: a
// claim does not read it, or its operations. The writes that change that
// (a finish that frees a slot, a record or requeue that brings work, a
// resume) bring eligible_at back to now.
package flow
