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
