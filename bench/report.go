package main

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// row is one measured pair: connstore and the anchor a user would pick.
type row struct {
	group, name, anchor string
	ours, theirs        float64
	// higherBetter is true for rates (ops/s), false for times.
	higherBetter bool
	// target is the ratio connstore must reach (ours over theirs as a
	// speed-up: rate ratio, or time ratio inverted).
	target float64
	// rounds are the ratios of paired rounds (both sides measured back to
	// back, in alternating order), when the measurement has them.
	rounds []float64
}

// ratio is how many times better connstore is than the anchor: the median
// of the paired rounds where there are any. On a shared machine the load
// drifts between rounds; a pair measured back to back sees the same load,
// so the median pair ratio moves less than the ratio of the medians.
func (r row) ratio() float64 {
	if len(r.rounds) > 0 {
		return median(r.rounds)
	}
	if r.higherBetter {
		return r.ours / r.theirs
	}
	return r.theirs / r.ours
}

// spread lists the paired rounds' ratios, lowest to highest.
func (r row) spread() string {
	if len(r.rounds) == 0 {
		return ""
	}
	s := append([]float64(nil), r.rounds...)
	sort.Float64s(s)
	if len(s) > 5 {
		return fmt.Sprintf(" (%d rounds, %.2f–%.2f)", len(s), s[0], s[len(s)-1])
	}
	parts := make([]string, len(s))
	for i, v := range s {
		parts[i] = fmt.Sprintf("%.2f", v)
	}
	return " (rounds " + strings.Join(parts, ", ") + ")"
}

type report struct {
	started time.Time
	rows    []row
	scale   []scalePoint
	workers []workersPoint
	// pairs are the paired runs measured so far, by configuration.
	pairs map[pairKey]paired
	notes []string
}

func (r *report) add(x row) { r.rows = append(r.rows, x) }

func met(ok bool) string {
	if ok {
		return "met"
	}
	return "**missed**"
}

func (r *report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run of %s (UTC), one PostgreSQL server, both sides in one process.\n\n", r.started.Format("2006-01-02 15:04"))
	b.WriteString("| measurement | connstore | anchor | anchor figure | ratio | target | |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	for _, x := range r.rows {
		fmt.Fprintf(&b, "| %s | %.4g | %s | %.4g | %.2f×%s | ≥ %.1f× | %s |\n", x.name, x.ours, x.anchor, x.theirs,
			x.ratio(), x.spread(), x.target, met(x.ratio() >= x.target))
	}
	if len(r.scale) > 0 {
		b.WriteString("\n| measurement (ms) |")
		for _, p := range r.scale {
			fmt.Fprintf(&b, " %d rows |", p.size)
		}
		b.WriteString(" growth | target | |\n| --- |")
		for range r.scale {
			b.WriteString(" --- |")
		}
		b.WriteString(" --- | --- | --- |\n")
		first, last := r.scale[0], r.scale[len(r.scale)-1]
		for _, name := range scaleSeries() {
			fmt.Fprintf(&b, "| %s |", name)
			for _, p := range r.scale {
				fmt.Fprintf(&b, " %.2f |", p.ms[name])
			}
			g := last.ms[name] / first.ms[name]
			fmt.Fprintf(&b, " %.2f× | ≤ 1.3× | %s |\n", g, met(g <= 1.3))
		}
	}
	for _, n := range r.notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	return b.String()
}

// chart draws the scale curves: milliseconds against journal rows, one
// line per measurement.
func (r *report) chart() string {
	var xs []int
	for _, p := range r.scale {
		xs = append(xs, p.size)
	}
	var lines []series
	for _, name := range scaleSeries() {
		l := series{name: name}
		for _, p := range r.scale {
			l.values = append(l.values, p.ms[name])
		}
		lines = append(lines, l)
	}
	return lineChart(xs, "journal rows (log scale)", "milliseconds", lines)
}

// workersChart draws the pool and River by worker count: ops/s against
// Concurrency (the pool) and MaxWorkers (River).
func (r *report) workersChart() string {
	var xs []int
	pool, river := series{name: "connstore worker.Pool"}, series{name: "River v0.51.2"}
	for _, p := range r.workers {
		xs = append(xs, p.n)
		pool.values, river.values = append(pool.values, p.pool), append(river.values, p.river)
	}
	return lineChart(xs, "workers: pool Concurrency, River MaxWorkers (log scale)", "ops/s", []series{pool, river})
}
