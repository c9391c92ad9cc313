package repository

import (
	"context"
	"errors"
	"time"

	"github.com/connstore/connstore/hooks"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// quietLogger passes the application's gorm logger every statement but
// keeps the repository's expected outcomes out of its error log: a lost
// compare-and-swap the repository retries or reports, and an absent row it
// returns as ErrNotFound. Every other error is logged as before.
type quietLogger struct{ logger.Interface }

// LogMode implements logger.Interface.
func (q quietLogger) LogMode(l logger.LogLevel) logger.Interface {
	return quietLogger{q.Interface.LogMode(l)}
}

// Trace implements logger.Interface.
func (q quietLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	if errors.Is(err, hooks.ErrConflict) || errors.Is(err, gorm.ErrRecordNotFound) {
		err = nil
	}
	q.Interface.Trace(ctx, begin, fc, err)
}

// ParamsFilter implements gorm.ParamsFilter by asking the
// application's logger, so one that keeps values out of its log (gorm's
// ParameterizedQueries) still does for the repository's statements.
func (q quietLogger) ParamsFilter(ctx context.Context, sql string, params ...any) (string, []any) {
	if f, ok := q.Interface.(gorm.ParamsFilter); ok {
		return f.ParamsFilter(ctx, sql, params...)
	}
	return sql, params
}
