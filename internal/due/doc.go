// Package due is the due sweep's mechanism without its database: the keyset
// page loop that reads a table a bounded page at a time, and the
// classification of watch rows into the sweep's two branches (SCHEDULE,
// decided by the row alone; AUDIT, decided by the document's current
// winner, read a chunk of candidates at a time). The repository supplies
// the reads; everything here runs, and is tested, in memory.
package due
