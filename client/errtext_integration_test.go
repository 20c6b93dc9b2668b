package client

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestFailCleansErrorText: a handler error with NUL bytes and invalid
// UTF-8 is stored with U+FFFD in their place, and a huge one is capped
// at 8 KiB (ADR 0039). Version 3 sent it raw: PostgreSQL refused it
// (22021), so the attempt could not be settled at all and the job waited
// for its lease to expire.
func TestFailCleansErrorText(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	c, err := New(ctx, pool)
	require.NoError(t, err)
	o := ops.New(pool)
	for _, tc := range []struct{ sent, want string }{
		{"bad\x00nul", "bad\ufffdnul"},
		{"bad \xff\xfe utf8", "bad \ufffd utf8"},
	} {
		id, err := c.Enqueue(ctx, "errtext", nil)
		require.NoError(t, err)
		jobs, err := c.Claim(ctx, "errtext", 1, time.Minute)
		require.NoError(t, err)
		require.Len(t, jobs, 1)
		j, err := c.Fail(ctx, id, jobs[0].Token, tc.sent)
		require.NoError(t, err, "%q", tc.sent)
		require.Equal(t, tc.want, j.LastError)
		require.Equal(t, tc.want, j.Errors[len(j.Errors)-1].Error)
		_, err = o.Cancel(ctx, id, tc.sent)
		require.NoError(t, err, "cancel reason %q", tc.sent)
	}
	huge := strings.Repeat("x", 1<<20)
	require.LessOrEqual(t, len(CleanErrorText(huge)), 8192)
	require.True(t, strings.HasSuffix(CleanErrorText(huge), " [truncated: 1048576 bytes]"))
	require.Equal(t, "ok", CleanErrorText("ok"))
}
