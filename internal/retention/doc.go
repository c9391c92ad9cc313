// Package retention is the journal's retention pass: the seed's keep rules
// as SQL (a finished row is collected only while newer rows of its kind
// exist on its document), and the pass that applies them within a bounded
// window of the table of rows to judge, holds what they keep (takes them
// out of that table) and releases holds in commit order from the queue of
// finished documents. The repository runs a Pass
// inside its transaction, with its scopes; the rules' probes look across
// scopes, as the seed's do.
package retention
