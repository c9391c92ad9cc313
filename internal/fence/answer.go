package fence

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxMessageBytes bounds an answer's message as stored: a provider's error
// body can be megabytes, and the message is for an operator's triage, not
// for keeping the body.
const MaxMessageBytes = 500

// Answer is how one attempt ended, as the journal keeps it for triage: the
// operation's last_kind, last_http_status and last_message, and
// last_answer_at, the time it was given. Setting last_answer_at is what
// adds the answer to the operation's attempt history (a trigger on that
// column, migration 0023), so a write that records an answer is one
// statement on the single and the batched paths alike.
type Answer struct {
	// Kind classifies the answer ("http", "timeout", "cancelled"); empty
	// when none was given (a handler's Dead with no cause).
	Kind string
	// HTTPStatus is the provider's status, if there was one.
	HTTPStatus *int64
	// Message is the short text the handler gave, as Message returns it.
	Message string
	// At is when it was given, in Unix milliseconds.
	At int64
}

// AnswerOf is an answer of kind alone, given at at.
func AnswerOf(kind string, at int64) Answer { return Answer{Kind: kind, At: at} }

// Set stores a on the columns of the operation's last answer. Each column
// is set, to NULL when a has no value for it: an answer replaces the last
// one whole, so a death never shows the cause of the failure before it.
func (a Answer) Set(set map[string]any) {
	set["last_kind"], set["last_http_status"], set["last_message"] = optional(a.Kind), a.HTTPStatus, optional(Message(a.Message))
	set["last_answer_at"] = a.At
}

// ClearAnswer removes the operation's last answer (a requeue: the next
// attempt's answer is its own). The history keeps what was answered.
func ClearAnswer(set map[string]any) {
	set["last_kind"], set["last_http_status"], set["last_message"], set["last_answer_at"] = nil, nil, nil, nil
}

// Message is s as an answer stores it: invalid UTF-8 replaced, every
// control character (a newline, a tab, an escape sequence that would
// rewrite an operator's terminal) and run of white space made one space,
// trimmed, and cut to MaxMessageBytes at a character boundary with "…".
func Message(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsControl(r) || unicode.IsSpace(r) || !unicode.IsPrint(r) && !unicode.IsMark(r) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		b.WriteRune(r)
		if b.Len() > 4*MaxMessageBytes {
			break // enough to know it is cut; the rest is never read
		}
	}
	out := b.String()
	if len(out) <= MaxMessageBytes {
		return out
	}
	cut := MaxMessageBytes - len("…")
	for !utf8.RuneStart(out[cut]) {
		cut--
	}
	return strings.TrimRight(out[:cut], " ") + "…"
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
