// Package fence defines each lease holder's write on the operation journal
// once: commit, failure, dead, reconcile-only, release, heartbeat and
// snooze. A definition is the columns the write sets, the guards it adds to
// its fence, the rule that recognises its own replay, and (Explain) why the
// stored row refused it. Plan renders any number of writes as one UPDATE
// joined to their rows; the repository runs a single write as a plan of one,
// so the single and the batched forms of a write cannot refuse differently.
//
// Everything here is a pure function of its inputs and is tested without a
// database; validation of the caller's values and the errors and events a
// refusal becomes are the repository's.
package fence
