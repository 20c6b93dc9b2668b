package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf16"

	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff/visible"
)

// Output conventions (docs/adr/0012): text is for people (aligned columns,
// times in UTC RFC 3339, durations in Go syntax rounded for people); --output json is for
// scripts (one JSON document, durations in microseconds).

// wantJSON reports whether --output json was given; any value other than
// text or json is a usage error.
func wantJSON(cmd *cobra.Command) (bool, error) {
	o, _ := cmd.Flags().GetString("output")
	switch o {
	case "text", "":
		return false, nil
	case "json":
		return true, nil
	}
	return false, usagef("--output %q: want text or json", o)
}

// writeJSON prints v as indented JSON followed by a newline. The JSON is
// the exact value, but the characters a terminal acts on that
// encoding/json leaves raw inside strings (DEL, C1 controls such as CSI,
// and the format characters: bidi overrides, zero-width characters) are
// written as \uXXXX escapes (a surrogate pair above U+FFFF), which mean
// the same string (ADR 0039).
func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return err
	}
	var out strings.Builder
	for _, r := range buf.String() {
		if r == '\n' || !dangerous(r) {
			out.WriteRune(r)
			continue
		}
		if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			fmt.Fprintf(&out, "\\u%04x\\u%04x", hi, lo)
			continue
		}
		fmt.Fprintf(&out, "\\u%04x", r)
	}
	_, err := io.WriteString(w, out.String())
	return err
}

// dangerous reports whether a terminal may act on r instead of showing
// it: control characters (C0, DEL, C1) and format characters (bidi
// embeddings, overrides, isolates and marks, which reorder what follows
// on the line; zero-width characters). The rule is the web UI's too
// (package visible).
func dangerous(r rune) bool { return visible.Acts(r) }

// esc renders text that came from producers or workers (queue, worker,
// dedupe key, error, payload) for a terminal: control and format
// characters become visible escapes (\n, \t, \x1b, \u009b, \u202e) and
// invalid UTF-8 bytes \xNN, so that nothing it contains can move the
// cursor, clear the screen, forge a line or reorder the text around it.
func esc(s string) string { return visible.Escape(s, "") }

// newTable returns an aligned-column writer; call Flush when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// row writes cells separated by tabs. Every cell is escaped (esc): a tab
// or newline inside one cannot shift columns or forge a row.
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = esc(c)
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// nowFlag returns the hidden --now time, or nil for the database's now().
func nowFlag(cmd *cobra.Command) (*time.Time, error) {
	s, _ := cmd.Flags().GetString("now")
	if s == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, usagef("--now %q: want an RFC 3339 time such as 2025-01-02T15:04:05Z", s)
	}
	return &t, nil
}

// clock returns --now, or the current time, for computing ages in Go.
func clock(cmd *cobra.Command) (time.Time, error) {
	t, err := nowFlag(cmd)
	if err != nil || t != nil {
		if t == nil {
			return time.Time{}, err
		}
		return *t, nil
	}
	return time.Now(), nil
}

// formatTime renders a timestamp for people; "-" for none.
func formatTime(t *time.Time) string {
	if t == nil || t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// formatDelay renders a duration for people, rounded (visible.Duration:
// "250ms", "1.18s", "1m2s"), the web UI's rule too.
func formatDelay(d time.Duration) string { return visible.Duration(d) }

// truncate shortens s to n runes with an ellipsis, on one line, with its
// control characters escaped (esc).
func truncate(s string, n int) string {
	s = esc(oneLine(s))
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

// withOutput is the RunE of a command that prints text or JSON: --output
// is checked before anything runs (another value is a usage error), and run
// is told which was asked for.
func withOutput(run func(cmd *cobra.Command, args []string, jsonOut bool) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		jsonOut, err := wantJSON(cmd)
		if err != nil {
			return err
		}
		return run(cmd, args, jsonOut)
	}
}

// flushPage ends a table of one page of a listing, and says how to get
// the next page when there is one.
func flushPage(w io.Writer, tw *tabwriter.Writer, next string) error {
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(w, "more: --after %s\n", next)
	}
	return nil
}

// checkLimit refuses a --limit below 1.
func checkLimit(limit int) error {
	if limit < 1 {
		return usagef("--limit %d: want at least 1", limit)
	}
	return nil
}

// switchVerb is the command that pauses (or resumes) a queue or a
// schedule.
func switchVerb(pause bool) string {
	if pause {
		return "pause"
	}
	return "resume"
}

// writeSwitch reports a pause or resume of the kind's ("queue",
// "schedule") name, shown as shown in text: whether it changed anything.
func writeSwitch(w io.Writer, jsonOut bool, kind, name, shown string, pause, changed bool) error {
	if jsonOut {
		return writeJSON(w, map[string]any{kind: name, "paused": pause, "changed": changed})
	}
	done, already := "resumed", "was not paused"
	if pause {
		done, already = "paused", "was already paused"
	}
	if changed {
		fmt.Fprintf(w, "%s %s %s\n", done, kind, shown)
	} else {
		fmt.Fprintf(w, "%s %s %s\n", kind, shown, already)
	}
	return nil
}
