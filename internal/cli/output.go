package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
)

// Output conventions (docs/adr/0012): text is for people (aligned columns,
// times in UTC RFC 3339, durations in Go syntax); --output json is for
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

// writeJSON prints v as indented JSON followed by a newline.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// newTable returns an aligned-column writer; call Flush when done.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// row writes cells separated by tabs.
func row(w io.Writer, cells ...string) {
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

// formatDelay renders a duration for people: Go syntax without trailing
// zero units ("1.5s", "2m", "1h30m").
func formatDelay(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// truncate shortens s to n runes with an ellipsis, on one line.
func truncate(s string, n int) string {
	s = oneLine(s)
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
