package connstoretest

import (
	"fmt"
	"sync/atomic"
)

// IDs hands out deterministic ids, prefix-1, prefix-2, …, so a test can
// name the lease tokens and row ids it will see. Pass IDs.Next as
// repository.Options.NewIDFunc and hooks.Config.NewIDFunc. It is safe for
// concurrent use.
type IDs struct {
	prefix string
	n      atomic.Int64
}

// NewIDs returns a source whose ids start with prefix.
func NewIDs(prefix string) *IDs { return &IDs{prefix: prefix} }

// Next returns the next id.
func (s *IDs) Next() string { return fmt.Sprintf("%s-%d", s.prefix, s.n.Add(1)) }
