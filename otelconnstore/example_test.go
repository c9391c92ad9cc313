package otelconnstore_test

import (
	"fmt"

	"github.com/connstore/connstore/otelconnstore"
	"github.com/connstore/connstore/repository"
	"go.opentelemetry.io/otel"
)

// ExampleNew wires the Observer to the global providers.
func ExampleNew() {
	obs, err := otelconnstore.New(otel.GetTracerProvider(), otel.GetMeterProvider())
	if err != nil {
		panic(err)
	}
	opts := repository.Options{Observer: obs}
	fmt.Println(opts.Observer != nil)
	// Output: true
}
