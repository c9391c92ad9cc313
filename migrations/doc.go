// Package migrations owns the connstore schema: the kubun_connector_* tables
// and the indexes their periodic queries need, applied with gormigrate under
// stable ids. Apps call Migrate once at startup.
package migrations
