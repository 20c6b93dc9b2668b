// Package visible is the one rule for showing text that producers and
// workers wrote (queue names, payloads, errors, worker ids) to an
// operator: characters that act instead of showing themselves are written
// as escapes. The CLI uses it for the terminal, the web UI for the page
// (docs/adr/0040-operator-output-and-partial-replay.md,
// docs/adr/0060-ui-hosts-token-and-bounded-reads.md). Durations shown to
// an operator are rounded by one rule here too (Duration), so that the CLI
// and the web UI read the same. A program of yours that shows jobs to
// people (a dashboard, a chat alert) can show them by the same rule.
package visible

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Acts reports whether r does something to the text around it instead of
// showing itself: a control character (Unicode category Cc: C0, DEL and
// C1, which terminals act on) or a format character (Cf: the bidi
// embeddings, overrides, isolates and marks that reorder what follows,
// zero-width spaces and joiners, the soft hyphen, the byte order mark,
// tag characters), which a terminal or a browser applies and does not
// show, so that "pay\u202eslo" reads "payols".
func Acts(r rune) bool {
	return unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r)
}

// Escape returns s with each character that Acts, except those in keep,
// written as a Go escape (\n, \t and \r by name, other ASCII controls as
// \x1b, the rest as \u202e or \U000e0041), and each byte of invalid UTF-8
// as \xNN. It returns s itself when there is nothing to escape.
func Escape(s, keep string) string {
	clean := true
	for i, r := range s {
		if (Acts(r) && !strings.ContainsRune(keep, r)) || (r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD")) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		case !Acts(r) || strings.ContainsRune(keep, r):
			b.WriteString(s[i : i+size])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case r < 0x80:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r <= 0xffff:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			fmt.Fprintf(&b, "\\U%08x", r)
		}
		i += size
	}
	return b.String()
}
