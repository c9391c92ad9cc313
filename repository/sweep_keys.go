package repository

import (
	"github.com/connstore/connstore/scopes"
	"gorm.io/gorm"
)

// MaxSweepApplyAttempts is the number of apply failures after which a
// sweep candidate is refused.
const MaxSweepApplyAttempts = 5

// PartitionKey identifies a sweep partition of one connector and owner.
type PartitionKey struct {
	OwnerDID, ConnectorName, Partition string
}

func (k PartitionKey) validate() error {
	return requireKeys("owner", k.OwnerDID, "connector", k.ConnectorName, "partition", k.Partition)
}

func (k PartitionKey) scope(db *gorm.DB) *gorm.DB {
	return db.Scopes(scopes.Owner(k.OwnerDID), scopes.Connector(k.ConnectorName), scopes.Eq("partition", k.Partition))
}

// ReceiptKey identifies one relist receipt of a partition.
type ReceiptKey struct {
	PartitionKey
	Provenance string
}

func (k ReceiptKey) validate() error {
	if err := k.PartitionKey.validate(); err != nil {
		return err
	}
	return requireKeys("provenance", k.Provenance)
}

func (k ReceiptKey) scope(db *gorm.DB) *gorm.DB {
	return db.Scopes(k.PartitionKey.scope, scopes.Eq("provenance", k.Provenance))
}

// CandidateKey identifies one sweep candidate of a receipt.
type CandidateKey struct {
	ReceiptKey
	DocumentID string
}

func (k CandidateKey) validate() error {
	if err := k.ReceiptKey.validate(); err != nil {
		return err
	}
	return requireKeys("document id", k.DocumentID)
}

func (k CandidateKey) scope(db *gorm.DB) *gorm.DB {
	return db.Scopes(k.ReceiptKey.scope, scopes.Eq("document_id", k.DocumentID))
}
