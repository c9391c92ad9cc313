// Command bench measures connstore beside the tools a user would pick
// instead, in one run on one PostgreSQL server, and writes the figures and
// a chart. make bench runs it against a throwaway server:
//
//	go run . -dsn "$CONNSTORE_TEST_PG_DSN" -out ..
//
// It is its own module, so River never enters connstore's dependencies.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"time"
)

func main() {
	dsn := flag.String("dsn", os.Getenv("CONNSTORE_TEST_PG_DSN"), "PostgreSQL URL DSN")
	out := flag.String("out", "..", "directory for bench-results.md, bench-scale.svg and bench-workers.svg")
	sizes := flag.String("sizes", "10000,100000,1000000", "journal sizes for the scale curves")
	jobs := flag.Int("jobs", 10000, "operations (and River jobs) per throughput run")
	only := flag.String("only", "", "run only this step (throughput, cas, receipt, scale, workers, breakdown, flow, dashboard)")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *dsn == "" {
		log.Fatal("bench: -dsn (or CONNSTORE_TEST_PG_DSN) is required")
	}
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			log.Fatalf("bench: -sizes: %v", err)
		}
		ns = append(ns, n)
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			log.Fatal(err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			log.Fatal(err)
		}
		defer pprof.StopCPUProfile()
	}
	ctx := context.Background()
	rep := &report{started: time.Now().UTC()}
	steps := []struct {
		name string
		run  func() error
	}{
		{"throughput", func() error { return throughput(ctx, *dsn, *jobs, rep) }},
		{"cas", func() error { return cas(ctx, *dsn, rep) }},
		{"receipt", func() error { return receipts(ctx, *dsn, rep) }},
		{"scale", func() error { return scale(ctx, *dsn, ns, rep) }},
		{"workers", func() error { return workers(ctx, *dsn, *jobs, rep) }},
		{"breakdown", func() error { return breakdown(ctx, *dsn, *jobs, rep) }},
		{"flow", func() error { return flow(ctx, *dsn, *jobs, ns, rep) }},
		{"dashboard", func() error { return dashboardBench(ctx, *dsn, ns, rep) }},
	}
	for _, s := range steps {
		if *only != "" && s.name != *only {
			continue
		}
		log.Printf("bench: %s", s.name)
		if err := s.run(); err != nil {
			log.Fatalf("bench %s: %v", s.name, err)
		}
	}
	md := rep.markdown()
	fmt.Print(md)
	if err := os.WriteFile(filepath.Join(*out, "bench-results.md"), []byte(md), 0o644); err != nil {
		log.Fatal(err)
	}
	// A step left out (-only) leaves its chart as the last full run drew it.
	if len(rep.scale) > 0 {
		if err := os.WriteFile(filepath.Join(*out, "bench-scale.svg"), []byte(rep.chart()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if len(rep.workers) > 0 {
		if err := os.WriteFile(filepath.Join(*out, "bench-workers.svg"), []byte(rep.workersChart()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
}
