package repository

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/connstore/connstore/models"
)

// okKey is what requireKeys accepts.
func okKey(keys ...string) bool {
	for _, k := range keys {
		if k == "" || len(k) > MaxKeyLength || !okText(k) {
			return false
		}
	}
	return true
}

// okText is what both databases store as text: valid UTF-8 without NUL.
func okText(s string) bool { return utf8.ValidString(s) && !bytes.ContainsRune([]byte(s), 0) }

// validJSONColumn is what a JSON column accepts: NULL (empty) or one valid
// document.
func validJSONColumn(b []byte) bool { return len(b) == 0 || (json.Valid(b) && okText(string(b))) }

// FuzzReceiptValidation: receipt and candidate validation never panics,
// refuses only with ErrInvalidInput, and accepts exactly the receipts whose
// keys are set and whose JSON fields are NULL or valid JSON.
func FuzzReceiptValidation(f *testing.F) {
	f.Add("owner", "crm", "contacts", "p1", "contact", []byte(`{"list":"all"}`), []byte(`["id"]`), []byte(nil), "doc-1", "contact")
	f.Add("", "crm", "contacts", "p1", "contact", []byte(`{`), []byte(`null`), []byte(`1e999`), "", "m")
	f.Add("o", "c", "p", "v", "m", []byte("\xff"), []byte(` [1, 2] `), []byte(`"s"`), "d", "")
	f.Fuzz(func(t *testing.T, owner, connector, partition, provenance, model string, scope, keep, predicate []byte, doc, docModel string) {
		rec := RelistReceipt{ReceiptKey: ReceiptKey{PartitionKey: PartitionKey{owner, connector, partition}, Provenance: provenance},
			ModelID: model, Scope: models.JSON(scope), Keep: models.JSON(keep), Predicate: models.JSON(predicate),
			SourceFetchHLC: "hlc", Kind: "full", Complete: true}
		err := validateReceipt(rec, []CandidateInput{{DocumentID: doc, ModelID: docModel}})
		want := okKey(owner, connector, partition, provenance, model, doc, docModel) &&
			validJSONColumn(scope) && validJSONColumn(keep) && validJSONColumn(predicate)
		if want != (err == nil) {
			t.Fatalf("accepted %v, want %v (err %v)", err == nil, want, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidInput) {
			t.Fatalf("refusal %v is not ErrInvalidInput", err)
		}
	})
}

// FuzzOperationInputValidation: operation validation never panics, refuses
// only with ErrInvalidInput, and accepts exactly complete inputs with a
// valid reissue intent and a non-empty document id when one is given.
func FuzzOperationInputValidation(f *testing.F) {
	f.Add("caller", "op-1", "owner", "crm", "hash", []byte(`{"op":"create"}`), "doc", true)
	f.Add("", "op-1", "owner", "crm", "hash", []byte(`{"op":`), "", true)
	f.Add("c", "o", "w", "n", "h", []byte(`null`), "d", false)
	f.Fuzz(func(t *testing.T, caller, id, owner, connector, hash string, intent []byte, doc string, withDoc bool) {
		in := OperationInput{CallerDID: caller, OperationID: id, NodeKey: "n", OwnerDID: owner, ConnectorName: connector,
			Model: "m", Op: "create", AccountKey: "a", Target: "t", DeterministicEventID: "e", PayloadHash: hash,
			ReissueIntent: models.JSON(intent)}
		if withDoc {
			in.DocumentID = &doc
		}
		err := validateOperationInput(in)
		parsed, perr := models.ParseJSON(intent)
		want := okKey(caller, id, owner, connector, hash) && perr == nil && !parsed.IsNull() && okText(string(intent)) &&
			(!withDoc || okKey(doc))
		if want != (err == nil) {
			t.Fatalf("accepted %v, want %v (err %v)", err == nil, want, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidInput) {
			t.Fatalf("refusal %v is not ErrInvalidInput", err)
		}
	})
}

// FuzzSyncStateValidation: sync-state validation never panics and accepts
// exactly known statuses, a set sync time, a non-negative count and NULL or
// valid JSON documents.
func FuzzSyncStateValidation(f *testing.F) {
	f.Add("crm", "owner", "idle", "t", int64(3), []byte(`{"page":1}`), []byte(nil))
	f.Add("crm", "", "running", "", int64(-1), []byte(`[`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, connector, owner, status, synced string, count int64, checkpoint, recovery []byte) {
		err := validateSyncStateInput(connector, owner, SyncStateInput{Checkpoint: models.JSON(checkpoint),
			LastSyncedAt: synced, EntityCount: count, Status: status, Recovery: models.JSON(recovery)})
		want := okKey(connector, owner) && syncStatuses[status] && synced != "" && okText(synced) && count >= 0 &&
			validJSONColumn(checkpoint) && validJSONColumn(recovery)
		if want != (err == nil) {
			t.Fatalf("accepted %v, want %v (err %v)", err == nil, want, err)
		}
		if err != nil && !errors.Is(err, ErrInvalidInput) {
			t.Fatalf("refusal %v is not ErrInvalidInput", err)
		}
	})
}
