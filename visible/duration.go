package visible

import (
	"strconv"
	"strings"
	"time"
)

// Duration renders d for a person reading a table or a page, rounded to
// what a person can use: three significant digits under a minute
// ("250ms", "1.18s", "9.09s"), whole seconds under an hour ("1m2s"),
// whole minutes under two days ("1h30m"), then days with one decimal
// ("2.5d"). Zero units at the end are dropped ("2m", not "2m0s"). The CLI
// and the web UI both use it, so that a duration reads the same in both;
// where the exact value matters (a configuration, --output json) they
// print it exactly instead.
func Duration(d time.Duration) string {
	if d < 0 {
		return "-" + Duration(-d)
	}
	switch {
	case d == 0:
		return "0s"
	case d < time.Minute:
		// Round to three significant digits: a unit of 10^(digits-3) ns.
		unit := time.Duration(1)
		for n := d / 1000; n > 0; n /= 10 {
			unit *= 10
		}
		d = d.Round(unit)
	case d < time.Hour:
		d = d.Round(time.Second)
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
	default:
		days := strconv.FormatFloat(d.Hours()/24, 'f', 1, 64)
		return strings.TrimSuffix(days, ".0") + "d"
	}
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
