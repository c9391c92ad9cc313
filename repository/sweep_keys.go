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

// String names the partition as owner/connector/partition.
func (k PartitionKey) String() string {
	return k.OwnerDID + "/" + k.ConnectorName + "/" + k.Partition
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

// String names the receipt as owner/connector/partition@provenance.
func (k ReceiptKey) String() string { return k.PartitionKey.String() + "@" + k.Provenance }

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

// String names the candidate as owner/connector/partition@provenance#document.
func (k CandidateKey) String() string { return k.ReceiptKey.String() + "#" + k.DocumentID }

func (k CandidateKey) validate() error {
	if err := k.ReceiptKey.validate(); err != nil {
		return err
	}
	return requireKeys("document id", k.DocumentID)
}

func (k CandidateKey) scope(db *gorm.DB) *gorm.DB {
	return db.Scopes(k.ReceiptKey.scope, scopes.Eq("document_id", k.DocumentID))
}
