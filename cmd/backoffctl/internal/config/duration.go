package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/pgbackoff/pgbackoff/client/policy"
)

// maxDuration bounds every duration in a file: policy.MaxDuration, the
// 876,600 hours (100 years of 365.25 days) that the CHECKs of
// backoff.policies and every interval the functions take accept. Larger
// values are certainly mistakes.
const maxDuration = policy.MaxDuration

// ParseDuration parses a configuration duration: Go syntax ("500ms", "30s",
// "1m", "1h30m", "1.5s"), non-negative, at most 876,600 hours, and a whole
// number of microseconds (PostgreSQL's interval resolution, so a value
// survives a round trip through the database unchanged). There is no day
// unit: write "48h".
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty duration: write a number and a unit, such as \"500ms\", \"30s\" or \"1h30m\"")
	}
	if _, err := strconv.ParseFloat(t, 64); err == nil && t != "0" {
		return 0, fmt.Errorf("duration %q has no unit: write e.g. \"%ss\" or \"%sms\"", s, t, t)
	}
	d, err := time.ParseDuration(t)
	if err != nil && strings.Contains(t, "d") {
		return 0, fmt.Errorf("bad duration %q: there is no day unit, write hours (e.g. \"48h\")", s)
	}
	if err != nil {
		return 0, fmt.Errorf("bad duration %q: use Go syntax such as \"500ms\", \"30s\", \"1m\" or \"1h30m\"", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("duration %q must not be negative", s)
	}
	if d > maxDuration {
		return 0, fmt.Errorf("duration %q is longer than %.0f hours (100 years of 365.25 days, the limit of backoff.policies)", s, maxDuration.Hours())
	}
	if d%time.Microsecond != 0 {
		return 0, fmt.Errorf("duration %q is finer than a microsecond, PostgreSQL's resolution", s)
	}
	return d, nil
}

// FormatDuration renders d in the shortest Go syntax that ParseDuration
// reads back exactly: "0s", "500ms", "1m", "1h30m", "1s500ms", "250us".
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	if d < 0 {
		b.WriteByte('-')
		d = -d
	}
	units := []struct {
		name string
		size time.Duration
	}{{"h", time.Hour}, {"m", time.Minute}, {"s", time.Second}, {"ms", time.Millisecond}, {"us", time.Microsecond}, {"ns", time.Nanosecond}}
	for _, u := range units {
		if n := d / u.size; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10))
			b.WriteString(u.name)
			d -= n * u.size
		}
	}
	return b.String()
}
