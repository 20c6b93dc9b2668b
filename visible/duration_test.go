package visible_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/visible"
)

func TestDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                      "0s",
		750 * time.Nanosecond:  "750ns",
		1500 * time.Nanosecond: "1.5µs",
		250 * time.Microsecond: "250µs",
		250*time.Millisecond + 417*time.Microsecond: "250ms",
		1182429 * time.Microsecond:                  "1.18s",
		9086 * time.Millisecond:                     "9.09s",
		1500 * time.Millisecond:                     "1.5s",
		59996 * time.Millisecond:                    "1m",
		62*time.Second + 400*time.Millisecond:       "1m2s",
		2 * time.Minute:                             "2m",
		90*time.Minute + 20*time.Second:             "1h30m",
		3 * time.Hour:                               "3h",
		60 * time.Hour:                              "2.5d",
		72 * time.Hour:                              "3d",
		-1182429 * time.Microsecond:                 "-1.18s",
	} {
		require.Equal(t, want, visible.Duration(d), "%d ns", int64(d))
	}
}
