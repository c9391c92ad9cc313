package dashboard

import (
	"fmt"
	"html/template"
	"net/url"
	"time"

	"github.com/connstore/connstore/internal/overview"
	"github.com/connstore/connstore/models"
)

// funcs are the templates' helpers.
func funcs(o Options) template.FuncMap {
	return template.FuncMap{
		"link": func(path string, kv ...string) string {
			q := url.Values{}
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i+1] != "" {
					q.Set(kv[i], kv[i+1])
				}
			}
			if len(q) == 0 {
				return o.BasePath + path
			}
			return o.BasePath + path + "?" + q.Encode()
		},
		"ms":       msTime,
		"count":    countText,
		"optms":    func(v *int64) string { return optMs(v) },
		"opt":      func(v *string) string { return deref(v) },
		"ago":      func(d time.Duration) string { return words(d) },
		"words":    words,
		"inWords":  inWords,
		"due":      func(v opView) int64 { return dueAt(v.NextAttemptAt, v.CreatedAt) },
		"optint":   func(v *int64) string { return optInt(v) },
		"terminal": func(s string) bool { return s != models.OperationAttempted },
		"list": func() []string {
			return []string{models.OperationAttempted, "overdue", models.OperationDead, models.OperationReconcileOnly, models.OperationCommitted}
		},
	}
}

func msTime(v int64) string { return time.UnixMilli(v).UTC().Format("2006-01-02 15:04:05.000Z") }

func optMs(v *int64) string {
	if v == nil {
		return ""
	}
	return msTime(*v)
}

func deref(v *string) string {
	if v == nil {
		return ""
	}
	return *v
}

func optInt(v *int64) string {
	if v == nil {
		return ""
	}
	return fmt.Sprint(*v)
}

// words is a duration as an operator reads it: 3 m 12 s, 2 h 5 m.
func words(d time.Duration) string {
	if d < 0 {
		d = -d
	}
	switch {
	case d < time.Second:
		return fmt.Sprintf("%d ms", d.Milliseconds())
	case d < time.Minute:
		return fmt.Sprintf("%d s", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%d m %d s", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h %d m", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%d d %d h", int(d.Hours())/24, int(d.Hours())%24)
	}
}

// inWords is a time relative to now: "in 3 m 12 s" or "3 m 12 s ago".
func inWords(at, now time.Time) string {
	if at.After(now) {
		return "in " + words(at.Sub(now))
	}
	return words(now.Sub(at)) + " ago"
}

// dueAt is when an operation is due: its next attempt time, or its
// record time when it has none.
func dueAt(next *int64, created int64) int64 {
	if next != nil {
		return *next
	}
	return created
}

// countText is a bounded count: "10000 or more" when it stopped at its cap.
func countText(c overview.Count) string {
	if c.AtLeast {
		return fmt.Sprintf("%d or more", c.N)
	}
	return fmt.Sprint(c.N)
}
