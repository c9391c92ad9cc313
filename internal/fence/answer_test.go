package fence

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// TestMessage: white space and control characters become one space, a
// message that fits is kept whole, a longer one is cut to MaxMessageBytes
// at a character boundary with "…", never over.
func TestMessage(t *testing.T) {
	for name, tc := range map[string]struct{ in, want string }{
		"plain":            {"provider said no", "provider said no"},
		"control and runs": {"  a\r\n\tb\x1b[2J\x00c  ", "a b [2J c"},
		"only controls":    {"\x00\x01\n", ""},
		"invalid UTF-8":    {"bad\xffbyte", "bad\uFFFDbyte"},
		"exactly max":      {strings.Repeat("a", MaxMessageBytes), strings.Repeat("a", MaxMessageBytes)},
		"space at the cut": {strings.Repeat("a", 496) + " bcdefgh", strings.Repeat("a", 496) + "…"},
		"fits with space":  {strings.Repeat("a", 497) + " b", strings.Repeat("a", 497) + " b"},
	} {
		t.Run(name, func(t *testing.T) {
			require.Equal(t, tc.want, Message(tc.in))
		})
	}
	for _, in := range []string{strings.Repeat("a", 497) + "\n\n\tbcdef", strings.Repeat("a", 496) + " é" + strings.Repeat("x", 10),
		strings.Repeat("é", 1000), strings.Repeat("\x00", 1<<20) + "z", strings.Repeat("ab ", 1<<20)} {
		m := Message(in)
		require.LessOrEqual(t, len(m), MaxMessageBytes)
		require.True(t, utf8.ValidString(m))
	}
}
