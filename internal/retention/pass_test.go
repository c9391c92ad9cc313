package retention_test

import (
	"fmt"
	"slices"
	"testing"

	"github.com/connstore/connstore/hooks"
	"github.com/connstore/connstore/internal/dbtest"
	"github.com/connstore/connstore/internal/dialect"
	"github.com/connstore/connstore/internal/retention"
	"github.com/connstore/connstore/models"
	"github.com/stretchr/testify/require"
	"gorm.io/gorm"
)

// TestPassIsBoundedAndConverges: on every leg, a pass deletes at most
// Limit rows, only rows the keep rules collect, and holds what they keep in
// its window of Budget × Limit judged rows; passes resume after the held
// rows until one deletes nothing, and what is left is exactly what the
// seed's rules keep: the newest commit of each document, no row without one.
func TestPassIsBoundedAndConverges(t *testing.T) {
	dbtest.Each(t, dbtest.All(), dbtest.Options{}, func(t *testing.T, e *dbtest.Env) {
		var want []string
		seq := 0
		add := func(doc *string) string {
			seq++
			row := dbtest.OpRow(seq, models.OperationCommitted, nil, int64(seq))
			row.DocumentID = doc
			require.NoError(t, hooks.SkipLock(e.DB).Create(&row).Error)
			return row.OperationID
		}
		for d := range 6 { // three commits per document: the newest is kept
			doc := fmt.Sprintf("doc-%d", d)
			for i := range 3 {
				if id := add(&doc); i == 2 {
					want = append(want, id)
				}
			}
		}
		add(nil) // rows without a document are collected
		add(nil)
		d, err := dialect.Of(e.DB)
		require.NoError(t, err)
		const limit = 4
		run := func() int64 {
			var n int64
			require.NoError(t, e.DB.Transaction(func(tx *gorm.DB) error {
				var err error
				n, err = retention.Pass{Scoped: func() *gorm.DB { return tx }, Base: func() *gorm.DB { return tx },
					Dialect: d, Before: 1000, Now: int64(0), Limit: limit}.Run()
				return err
			}))
			return n
		}
		passes := 0
		for n := run(); n > 0; n = run() {
			require.LessOrEqual(t, n, int64(limit), "a pass deletes at most Limit rows")
			passes++
			require.Less(t, passes, 10, "passes converge")
		}
		require.GreaterOrEqual(t, passes, 14/limit, "14 collectable rows take several passes")
		var left []string
		require.NoError(t, e.DB.Model(&models.Operation{}).Order("operation_id").Pluck("operation_id", &left).Error)
		slices.Sort(want)
		require.Equal(t, want, left)
		var waiting int64
		require.NoError(t, e.DB.Model(&models.RetentionPending{}).Count(&waiting).Error)
		require.Zero(t, waiting, "what the rules keep is held (out of the rows to judge), so later windows skip it")
	})
}
