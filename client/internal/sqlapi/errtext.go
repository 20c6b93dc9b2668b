package sqlapi

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxErrorText is the size, in bytes, at which the database cuts an error
// text (backoff._error_text, ADR 0039).
const MaxErrorText = 8192

// CleanErrorText returns s as the database stores an error text: NUL bytes
// and invalid UTF-8 replaced by U+FFFD (PostgreSQL text can hold neither,
// and refuses the whole call), and anything beyond 8 KiB cut at a
// character boundary, ending with " [truncated: N bytes]" (N = len(s)).
// Fail (client) and Cancel (ops) apply it before sending, so that a
// handler's error can always be recorded and a huge one does not travel to
// the server.
func CleanErrorText(s string) string {
	if strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s) {
		s = strings.ReplaceAll(strings.ToValidUTF8(s, "\ufffd"), "\x00", "\ufffd")
	}
	if len(s) <= MaxErrorText {
		return s
	}
	marker := " [truncated: " + strconv.Itoa(len(s)) + " bytes]"
	cut := 8150 // as the database: 8150 bytes of text, then the marker
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + marker
}
