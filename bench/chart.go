package main

import (
	"fmt"
	"math"
	"strings"
)

// series is one line of a chart: a name and a value per x.
type series struct {
	name   string
	values []float64
}

// lineChart draws series against xs on a log axis as an SVG, with the axes'
// labels; it is the one renderer of the bench's charts.
func lineChart(xs []int, xLabel, yLabel string, lines []series) string {
	const w, h, pad = 640.0, 360.0, 56.0
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" font-family="sans-serif" font-size="12">`, w, h)
	b.WriteString(`<rect width="100%" height="100%" fill="white"/>`)
	if len(xs) < 2 {
		return b.String() + "</svg>"
	}
	maxY := 0.0
	for _, l := range lines {
		for _, v := range l.values {
			maxY = math.Max(maxY, v)
		}
	}
	maxY *= 1.15
	if maxY == 0 {
		maxY = 1
	}
	lo, hi := math.Log10(float64(xs[0])), math.Log10(float64(xs[len(xs)-1]))
	x := func(n int) float64 { return pad + (math.Log10(float64(n))-lo)/(hi-lo)*(w-2*pad) }
	y := func(v float64) float64 { return h - pad - v/maxY*(h-2*pad) }
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`, pad, h-pad, w-pad, h-pad)
	fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="black"/>`, pad, pad, pad, h-pad)
	for _, n := range xs {
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">%d</text>`, x(n), h-pad+18, n)
	}
	for i := 0; i <= 4; i++ {
		v := maxY * float64(i) / 4
		fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="end">%.4g</text>`, pad-6, y(v)+4, v)
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">%s</text>`, w/2, h-12, xLabel)
	fmt.Fprintf(&b, `<text x="14" y="%g" transform="rotate(-90 14 %g)" text-anchor="middle">%s</text>`, h/2, h/2, yLabel)
	colors := []string{"#c0392b", "#e67e22", "#2471a3", "#5dade2", "#8e44ad", "#16a085", "#7f8c8d", "#1e8449"}
	for i, l := range lines {
		var pts []string
		for j, v := range l.values {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(xs[j]), y(v)))
		}
		color := colors[i%len(colors)]
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<text x="%g" y="%g" fill="%s">%s</text>`, pad+10, pad+14*float64(i), color, l.name)
	}
	return b.String() + "</svg>"
}
