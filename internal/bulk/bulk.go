// Package bulk runs an operator's action over the operations a filter
// matches (requeue every dead operation of an account since a time,
// cancel an owner's queue): it reads the matching rows page by page along
// the listing that ListOperationsByState uses, and applies the action to
// each page in one conditional statement, the single-operation call's own
// predicate (its states, and for a cancel a lease that is not live), so a
// row a worker took or finished between the read and the write is left
// alone, and a live lease is never requeued or cancelled under its holder.
//
// Every call is bounded: at most Limit rows matched (Max at most) and
// ScanRows rows read, whatever the backlog, so an action over a million
// rows is many short calls (each resumes after Result.Next), never one
// statement that holds the journal's rows for minutes.
package bulk

import (
	"context"
	"fmt"

	"github.com/connstore/connstore/models"
)

// Max is the most rows one call matches.
const Max = 1000

// ScanRows is the most rows one call reads to find its matches: a filter
// the listing's index does not narrow (an account, a time) reads the
// state's rows in order, and a call stops after this many.
const ScanRows = 20 * Max

// pageSize is the rows read, and written, per statement.
const pageSize = 200

// Lister reads the next page of the state's rows that the listing's own
// filters match, in the listing's order, after the row after (nil: from
// the first).
type Lister func(ctx context.Context, after *models.Operation, limit int) ([]models.Operation, error)

// Applier applies the action to rows in one conditional statement and
// returns the rows it changed, as stored after it.
type Applier func(ctx context.Context, rows []*models.Operation) ([]models.Operation, error)

// Params are one call's bounds and the filters the listing cannot apply.
type Params struct {
	// Limit is the most rows matched, 1 to Max.
	Limit int
	// DryRun counts what the call would change and changes nothing.
	DryRun bool
	// Before, in Unix milliseconds, matches only rows last written before
	// it (0: any): for a finished row, when it finished.
	Before int64
	// Held reports a row the action must leave to its lease's holder (a
	// cancel's live lease); nil: none is.
	Held func(*models.Operation) bool
}

// Result is what one call matched and did.
type Result struct {
	// Matched is the rows the filter matched (at most Limit).
	Matched int `json:"matched"`
	// Changed is the rows the action changed; a dry run changes none.
	Changed int `json:"changed"`
	// Held is the matched rows left to a live lease's holder.
	Held int `json:"held"`
	// Moved is the matched rows a worker or another operator moved between
	// the read and the write (the write's own predicate left them alone).
	Moved int `json:"moved"`
	// More reports that the call stopped at Limit or ScanRows with rows
	// of the listing still unread (they may not all match the time
	// filter): call again, after Next, for the rest.
	More bool `json:"more"`
	// Next is the last row read when More: a call resumes after it.
	Next *models.Operation `json:"-"`
}

// Run reads the rows after after through list, matches them against p and
// applies apply to each page's matches (unless p.DryRun).
func Run(ctx context.Context, p Params, after *models.Operation, list Lister, apply Applier) (Result, error) {
	var res Result
	if p.Limit < 1 || p.Limit > Max {
		return res, fmt.Errorf("limit %d is not 1 to %d", p.Limit, Max)
	}
	for read := 0; ; {
		want := min(pageSize, ScanRows-read)
		page, err := list(ctx, after, want)
		if err != nil {
			return res, err
		}
		var todo []*models.Operation
		unread := 0
		for i := range page {
			op := &page[i]
			read++
			after = op
			if p.Before > 0 && op.UpdatedAt >= p.Before {
				continue
			}
			res.Matched++
			if p.Held != nil && p.Held(op) {
				res.Held++
			} else {
				todo = append(todo, op)
			}
			if res.Matched == p.Limit {
				unread = len(page) - 1 - i
				break
			}
		}
		if !p.DryRun && len(todo) > 0 {
			changed, err := apply(ctx, todo)
			if err != nil {
				return res, err
			}
			res.Changed += len(changed)
			res.Moved += len(todo) - len(changed)
		}
		end := len(page) < want // the listing has no more rows
		switch {
		case res.Matched == p.Limit && unread == 0 && !end:
			// The limit fell on a full page's last row: look for one more.
			next, err := list(ctx, after, 1)
			if err != nil {
				return res, err
			}
			res.More = len(next) > 0
		case res.Matched == p.Limit:
			res.More = unread > 0
		case end:
			return res, nil
		case read >= ScanRows:
			res.More = true
		default:
			continue
		}
		if res.More {
			res.Next = after
		}
		return res, nil
	}
}
