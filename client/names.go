package client

import (
	"unicode"
	"unicode/utf8"
)

// ValidName reports whether s is a name the database accepts for a queue,
// policy, worker or dedupe key (backoff._check_name, ADR 0039,
// docs/adr/0059): 1 to 128 bytes without C0, DEL or C1 control characters
// or Unicode format characters (formatChars).
func ValidName(s string) bool {
	if len(s) < 1 || len(s) > 128 || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || (r >= 0x7f && r <= 0x9f) || unicode.Is(formatChars, r) {
			return false
		}
	}
	return true
}

// formatChars are the format characters (general category Cf) of Unicode
// 15 that backoff._bad_name_chars refuses in names: zero-width characters,
// bidi marks, embeddings, overrides and isolates, the byte order mark and
// tags, which make one name look like another or reorder the text around
// it. Written out rather than unicode.Cf so that the file and the database
// agree whatever Unicode version Go has; a test checks it still covers
// unicode.Cf.
var formatChars = &unicode.RangeTable{
	R16: []unicode.Range16{
		{Lo: 0x00ad, Hi: 0x00ad, Stride: 1},
		{Lo: 0x0600, Hi: 0x0605, Stride: 1},
		{Lo: 0x061c, Hi: 0x061c, Stride: 1},
		{Lo: 0x06dd, Hi: 0x06dd, Stride: 1},
		{Lo: 0x070f, Hi: 0x070f, Stride: 1},
		{Lo: 0x0890, Hi: 0x0891, Stride: 1},
		{Lo: 0x08e2, Hi: 0x08e2, Stride: 1},
		{Lo: 0x180e, Hi: 0x180e, Stride: 1},
		{Lo: 0x200b, Hi: 0x200f, Stride: 1},
		{Lo: 0x202a, Hi: 0x202e, Stride: 1},
		{Lo: 0x2060, Hi: 0x2064, Stride: 1},
		{Lo: 0x2066, Hi: 0x206f, Stride: 1},
		{Lo: 0xfeff, Hi: 0xfeff, Stride: 1},
		{Lo: 0xfff9, Hi: 0xfffb, Stride: 1},
	},
	R32: []unicode.Range32{
		{Lo: 0x110bd, Hi: 0x110bd, Stride: 1},
		{Lo: 0x110cd, Hi: 0x110cd, Stride: 1},
		{Lo: 0x13430, Hi: 0x1343f, Stride: 1},
		{Lo: 0x1bca0, Hi: 0x1bca3, Stride: 1},
		{Lo: 0x1d173, Hi: 0x1d17a, Stride: 1},
		{Lo: 0xe0001, Hi: 0xe0001, Stride: 1},
		{Lo: 0xe0020, Hi: 0xe007f, Stride: 1},
	},
}
