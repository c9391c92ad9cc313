package fence

import "github.com/connstore/connstore/models"

// Target names the leased operation a write is for and the token its
// holder was given.
type Target struct {
	CallerDID, OperationID, LeaseToken string
}

// String names the operation as caller/operation.
func (t Target) String() string { return t.CallerDID + "/" + t.OperationID }

// Guard narrows a write beyond its fence: the stored column must equal
// Value, or with OrNull may also still be NULL.
type Guard struct {
	Col    string
	Value  any
	OrNull bool
}

// Write is one lease holder's write.
type Write struct {
	// Action names the write in refusals and events ("commit", "mark
	// dead", …), the same on the single and the batched path.
	Action string
	Target Target
	// Set is every column the write stores, by name.
	Set map[string]any
	// Guards narrow the UPDATE beyond the fence; Mismatch explains a row
	// they refused (nil when the write has none).
	Guards   []Guard
	Mismatch func(*models.Operation) Verdict
	// Ends marks a lease-ending write: it clears the lease and records the
	// token it ended (Stamp). Replayed reports that a stored row whose
	// lease this token ended shows exactly this write's result.
	Ends     bool
	Replayed func(*models.Operation) bool
}

// Stamp adds what every write sets when it is made: updated_at (Unix
// milliseconds), and for a lease-ending write the cleared lease and the
// token it ended, which is what makes its replay recognisable.
func (w *Write) Stamp(nowMillis int64) {
	w.Set["updated_at"] = nowMillis
	if w.Ends {
		w.Set["lease_token"], w.Set["lease_expires_at"], w.Set["ended_lease_token"] = nil, nil, w.Target.LeaseToken
	}
}
