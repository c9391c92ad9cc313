package main

import (
	"fmt"
	"math"
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
	notes   []string
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

// chart draws the scale curves as an SVG: milliseconds against journal
// rows on a log axis, one line per measurement.
func (r *report) chart() string {
	const w, h, pad = 640.0, 360.0, 56.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" font-family="sans-serif" font-size="12">`, w, h)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>`)
	if len(r.scale) < 2 {
		return b.String() + "</svg>"
	}
	maxY := 0.0
	for _, p := range r.scale {
		for _, v := range p.ms {
			maxY = math.Max(maxY, v)
		}
	}
	maxY *= 1.15
	lo, hi := math.Log10(float64(r.scale[0].size)), math.Log10(float64(r.scale[len(r.scale)-1].size))
	x := func(n int) float64 { return pad + (math.Log10(float64(n))-lo)/(hi-lo)*(w-2*pad) }
	y := func(v float64) float64 { return h - pad - v/maxY*(h-2*pad) }
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`, pad, h-pad, w-pad, h-pad)
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`, pad, pad, pad, h-pad)
	for _, p := range r.scale {
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">%d</text>`, x(p.size), h-pad+18, p.size)
	}
	for i := 0; i <= 4; i++ {
		v := maxY * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="end">%.1f</text>`, pad-6, y(v)+4, v)
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">journal rows (log scale)</text>`, w/2, h-12)
	fmt.Fprintf(&b, `<text x="14" y="%g" transform="rotate(-90 14 %g)" text-anchor="middle">milliseconds</text>`, h/2, h/2)
	colors := []string{"#c0392b", "#e67e22", "#2471a3", "#5dade2", "#8e44ad", "#16a085", "#7f8c8d", "#1e8449"}
	for i, name := range scaleSeries() {
		var pts []string
		for _, p := range r.scale {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.size), y(p.ms[name])))
		}
		color := colors[i%len(colors)]
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%g" y="%g" fill="%s">%s</text>`, pad+10, pad+14*float64(i), color, name)
	}
	return b.String() + "</svg>"
}
