package lifecycle_test

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestByIDCallsRefuseANullID: every call on one job by id refuses a NULL
// id with the same sentence, naming the call: acquire, cancel and replay
// check it first in their own lines, the settle calls on their shared
// error path (backoff._raise_fencing_error). The copies stay equal
// through this test (docs/adr/0073).
func TestByIDCallsRefuseANullID(t *testing.T) {
	t.Parallel()
	db := newDB(t)
	for verb, sql := range map[string]string{
		"acquire":   `SELECT backoff.acquire(NULL, 'w', p_now => $1)`,
		"cancel":    `SELECT backoff.cancel(NULL, 'why', $1)`,
		"replay":    `SELECT backoff.replay(NULL, $1)`,
		"complete":  `SELECT backoff.complete(NULL, 1, $1)`,
		"fail":      `SELECT backoff.fail(NULL, 1, 'boom', p_now => $1)`,
		"heartbeat": `SELECT backoff.heartbeat(NULL, 1, p_now => $1)`,
		"snooze":    `SELECT backoff.snooze(NULL, 1, interval '1 minute', $1)`,
	} {
		pgErr := requireCode(t, execErr(db, sql, t0), "22023")
		require.Equal(t, `cannot `+verb+` job "NULL": job id must not be null`, pgErr.Message, verb)
	}
}
