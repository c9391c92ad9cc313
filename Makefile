.PHONY: test lint bench gobench example

# The whole suite, with a throwaway PostgreSQL (see scripts/test.sh).
test:
	bash scripts/test.sh

# gofmt, go vet and staticcheck, and the project's own rules
# (scripts/lint-rules.sh: no state literals in SQL, no dialect branch in
# the repository).
lint:
	@test -z "$$(gofmt -l .)" || (gofmt -l . && exit 1)
	bash scripts/lint-rules.sh
	go vet ./...
	go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd otelconnstore && go vet ./... && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd bench && go vet ./... && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...
	cd dashboard/browsertest && go vet ./... && go run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# The side-by-side bench against River and raw pgx, on a throwaway
# PostgreSQL; writes bench-results.md and bench-scale.svg (see BENCHMARKS.md).
# The in-module Go benchmarks: make gobench.
bench:
	bash scripts/test.sh --bench

gobench:
	bash scripts/test.sh -run '^$$' -bench . -benchmem ./...

example:
	go run ./example
