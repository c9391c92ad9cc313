package migrations

import (
	"fmt"
	"strconv"
)

// PartitionedLayout is the PostgreSQL DDL of a hash-partitioned connstore
// schema, for tables too large for one heap: run it on an empty schema,
// then Migrate, which adopts the tables it finds (adding every column and
// index the migrations declare) instead of creating them. The journal is
// partitioned by caller_did (its key is caller_did, operation_id), pending
// authorizations by state (their key), the other tables by owner_did (the
// first column of each of their keys): PostgreSQL requires a partitioned
// table's primary key and unique indexes to include its partition key.
// Keeping one owner's operations in one partition would need owner_did in
// the operation's key, which the seed's schema does not have. Partitions
// is the number of hash partitions per table, 2 to 1024; any other number
// is an error. Rolling back a migration that created tables drops them:
// run the layout again before migrating up, or they come back unpartitioned.
func PartitionedLayout(partitions int) ([]string, error) {
	if partitions < 2 || partitions > 1024 {
		return nil, fmt.Errorf("connstore: partitioned layout: %d partitions; pass 2 to 1024", partitions)
	}
	tables := []struct{ name, keyColumns, primaryKey, by string }{
		{"kubun_connector_sync_state", "connector_name TEXT NOT NULL, owner_did TEXT NOT NULL",
			"connector_name, owner_did", "owner_did"},
		{"kubun_connector_pending_auth", "state TEXT NOT NULL", "state", "state"},
		{"kubun_connector_operation", `caller_did TEXT COLLATE "C" NOT NULL, operation_id TEXT COLLATE "C" NOT NULL`,
			"caller_did, operation_id", "caller_did"},
		{"kubun_connector_projection_watch", "owner_did TEXT NOT NULL, connector_name TEXT NOT NULL, model TEXT NOT NULL, " +
			"account_key TEXT NOT NULL, source_id TEXT NOT NULL",
			"owner_did, connector_name, model, account_key, source_id", "owner_did"},
		{"kubun_connector_sweep_receipt", `owner_did TEXT NOT NULL, connector_name TEXT NOT NULL, "partition" TEXT NOT NULL, ` +
			"provenance TEXT NOT NULL", `owner_did, connector_name, "partition", provenance`, "owner_did"},
		{"kubun_connector_sweep_candidate", `owner_did TEXT NOT NULL, connector_name TEXT NOT NULL, "partition" TEXT NOT NULL, ` +
			"provenance TEXT NOT NULL, document_id TEXT NOT NULL",
			`owner_did, connector_name, "partition", provenance, document_id`, "owner_did"},
		{"kubun_connector_sweep_checkpoint", `owner_did TEXT NOT NULL, connector_name TEXT NOT NULL, "partition" TEXT NOT NULL`,
			`owner_did, connector_name, "partition"`, "owner_did"},
	}
	var ddl []string
	for _, t := range tables {
		ddl = append(ddl, "CREATE TABLE "+t.name+" ("+t.keyColumns+", PRIMARY KEY ("+t.primaryKey+")) PARTITION BY HASH ("+t.by+")")
		for i := range partitions {
			ddl = append(ddl, "CREATE TABLE "+t.name+"_p"+strconv.Itoa(i)+" PARTITION OF "+t.name+
				" FOR VALUES WITH (MODULUS "+strconv.Itoa(partitions)+", REMAINDER "+strconv.Itoa(i)+")")
		}
	}
	return ddl, nil
}
