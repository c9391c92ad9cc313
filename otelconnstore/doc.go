// Package otelconnstore adapts connstore's repository.Observer to
// OpenTelemetry: one span per repository call (so the statement spans of
// gorm's OpenTelemetry plugin nest under it) and one counter per event kind,
// so "CAS retries per minute" and "leases lost" are a query away. It is its
// own module, so connstore itself never depends on OpenTelemetry.
//
//	obs, err := otelconnstore.New(otel.GetTracerProvider(), otel.GetMeterProvider())
//	repo, err := repository.New(db, repository.Options{Observer: obs})
package otelconnstore
