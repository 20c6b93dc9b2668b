package client

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestClassifiedErrorsUnwrap(t *testing.T) {
	t.Parallel()
	base := errors.New("base")
	d, ok := RetryAfterDelay(fmt.Errorf("wrapped: %w", RetryAfter(base, time.Minute)))
	require.True(t, ok)
	require.Equal(t, time.Minute, d)
	require.ErrorIs(t, RetryAfter(base, 0), base)
	require.ErrorIs(t, Permanent(base), base)
	require.Nil(t, Permanent(nil))
	s, ok := SnoozeDelay(Snooze(-time.Second))
	require.True(t, ok)
	require.Equal(t, time.Duration(0), s)
	_, ok = SnoozeDelay(base)
	require.False(t, ok)
}

// The wrappers say what to do with the job, not what went wrong: their text
// is the handler's, which is what the job's history and error signatures
// record (the kind is recorded apart: the dead-letter reason, run_at).
func TestClassifiedErrorsKeepTheHandlersText(t *testing.T) {
	t.Parallel()
	base := errors.New("malformed address")
	require.Equal(t, "malformed address", Permanent(base).Error())
	require.Equal(t, "malformed address", RetryAfter(base, time.Minute).Error())
	require.Equal(t, "send: malformed address", fmt.Errorf("send: %w", Permanent(RetryAfter(base, time.Second))).Error())
	require.Equal(t, "retry requested", RetryAfter(nil, time.Second).Error())
	require.Equal(t, "malformed address", readOutcome(fmt.Errorf("%w", Permanent(base))).err.Error())
}
