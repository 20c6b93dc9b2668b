package visible_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/visible"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcödé, 日本語, emoji 🙂": "plain text, ünïcödé, 日本語, emoji 🙂",
		"\x1b[31mred\x1b[0m":                `\x1b[31mred\x1b[0m`,
		"a\nb\tc\rd\x00e\x7f":               `a\nb\tc\rd\x00e\x7f`,
		"csi \u009b1m":                      `csi \u009b1m`,
		"pay\u202eslo":                      `pay\u202eslo`,
		"\u2066iso\u2069 \u200e\u200f":      `\u2066iso\u2069 \u200e\u200f`,
		"zero\u200bwidth\u200c\u200d\u2060": `zero\u200bwidth\u200c\u200d\u2060`,
		"\ufeffbom \u00adshy \u061c":        `\ufeffbom \u00adshy \u061c`,
		"tag \U000e0041":                    `tag \U000e0041`,
		"bad \xff utf8, real \uFFFD":        "bad \\xff utf8, real \uFFFD",
	} {
		require.Equal(t, want, visible.Escape(in, ""), "%q", in)
	}
	require.Equal(t, "a\nb\tc\\r\\u202e", visible.Escape("a\nb\tc\r\u202e", "\n\t"))
}

// TestActs: controls and format characters act; letters, combining
// marks, emoji and spaces a reader sees do not.
func TestActs(t *testing.T) {
	for _, r := range "\x00\x1b\x7f\u0085\u009b\u00ad\u061c\u200b\u200d\u200e\u202a\u202e\u2066\u2069\u2060\ufeff\U000e0001\U000e007f" {
		require.True(t, visible.Acts(r), "%U", r)
	}
	for _, r := range "a é \u0301 🙂 \u00a0\u3000\u2028" {
		require.False(t, visible.Acts(r), "%U", r)
	}
}
