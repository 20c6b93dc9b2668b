package webui

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The overview asks backoff.health once a minute, whatever its refresh;
// a failed read keeps the last warning.
func TestHealthIsReadOnceAMinute(t *testing.T) {
	var hc healthCache
	reads := 0
	answer := func(w string, err error) func() (string, error) {
		return func() (string, error) {
			reads++
			return w, err
		}
	}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	require.Equal(t, "held", hc.get(t0, answer("held", nil)))
	require.Equal(t, "held", hc.get(t0.Add(5*time.Second), answer("", nil)), "kept within the minute")
	require.Equal(t, "held", hc.get(t0.Add(59*time.Second), answer("", nil)))
	require.Equal(t, 1, reads)
	require.Equal(t, "", hc.get(t0.Add(time.Minute), answer("", nil)), "read again after a minute")
	require.Equal(t, 2, reads)
	require.Equal(t, "", hc.get(t0.Add(3*time.Minute), answer("new", errors.New("permission denied"))), "a failed read keeps the last")
	require.Equal(t, "new", hc.get(t0.Add(3*time.Minute), answer("new", nil)), "and is tried again at the next refresh")
	require.Equal(t, "back", hc.get(t0.Add(2*time.Minute), answer("back", nil)), "a clock that went back reads again")
	require.Equal(t, 5, reads)
}
