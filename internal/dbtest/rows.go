package dbtest

import (
	"fmt"

	"github.com/connstore/connstore/models"
)

// OpRow is operation i ("caller"/"op-00000i" of "owner"'s "crm") with every
// required column set, in state, due at next (nil: due since created), for
// seeding a journal directly.
func OpRow(i int, state string, next *int64, created int64) models.Operation {
	id := fmt.Sprintf("op-%06d", i)
	return models.Operation{
		CallerDID: "caller", OperationID: id, NodeKey: "n", OwnerDID: "owner", ConnectorName: "crm",
		Model: "m", Op: "create", AccountKey: "a", Target: "t", DeterministicEventID: "e" + id,
		PayloadHash: "h", ReissueIntent: models.JSON(`{}`), State: state, NextAttemptAt: next,
		CreatedAt: created, UpdatedAt: created,
	}
}
