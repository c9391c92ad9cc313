.PHONY: test lint bench example

# The whole suite, with a throwaway PostgreSQL (see scripts/test.sh).
test:
	bash scripts/test.sh

# gofmt, go vet and staticcheck.
lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd otelconnstore && go vet ./... && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Benchmarks against PostgreSQL and SQLite (see BENCHMARKS.md).
bench:
	bash scripts/test.sh -run '^$$' -bench . -benchmem ./...

example:
	go run ./example
