package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/policy"
)

// recordSleeps returns a Sleep that records each delay instead of
// waiting: no test of Retry ever sleeps for a backoff.
func recordSleeps(delays *[]time.Duration) Option {
	return Sleep(func(ctx context.Context, d time.Duration) error {
		*delays = append(*delays, d)
		return ctx.Err()
	})
}

func testPolicy() policy.Policy {
	p := policy.Defaults()
	p.Name = "test"
	p.Base = 100 * time.Millisecond
	p.Max = 10 * time.Second
	p.MaxAttempts = 4
	p.Jitter = policy.JitterFull
	return p
}

func TestRetryUsesThePolicyDelays(t *testing.T) {
	t.Parallel()
	p := testPolicy()
	var delays []time.Duration
	calls := 0
	err := Do(context.Background(), p, func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return fmt.Errorf("flaky %d", calls)
		}
		return nil
	}, Seed(42), recordSleeps(&delays))
	require.NoError(t, err)
	require.Equal(t, 3, calls)
	// The same math as backoff.retry_delay(policy, n, 42).
	require.Equal(t, []time.Duration{p.Delay(1, 42), p.Delay(2, 42)}, delays)
	require.NotEqual(t, delays[0], delays[1])
}

func TestRetryReturnsTheLastErrorAfterExhaustion(t *testing.T) {
	t.Parallel()
	p := testPolicy()
	var delays []time.Duration
	calls := 0
	sentinel := errors.New("last")
	err := Do(context.Background(), p, func(ctx context.Context) error {
		calls++
		if calls == p.MaxAttempts {
			return sentinel
		}
		return fmt.Errorf("attempt %d", calls)
	}, recordSleeps(&delays))
	require.ErrorIs(t, err, sentinel)
	require.ErrorContains(t, err, "gave up after 4 attempts")
	require.Equal(t, p.MaxAttempts, calls)
	require.Len(t, delays, p.MaxAttempts-1, "no wait after the last attempt")
}

func TestRetryStopsOnPermanentAndPredicate(t *testing.T) {
	t.Parallel()
	bad := errors.New("bad request")
	calls := 0
	err := Do(context.Background(), testPolicy(), func(ctx context.Context) error {
		calls++
		return client.Permanent(bad)
	}, recordSleeps(new([]time.Duration)))
	require.ErrorIs(t, err, bad)
	require.True(t, client.IsPermanent(err))
	require.Equal(t, 1, calls)

	transient := errors.New("transient")
	calls = 0
	err = Do(context.Background(), testPolicy(), func(ctx context.Context) error {
		calls++
		if calls == 1 {
			return transient
		}
		return bad
	}, If(func(err error) bool { return errors.Is(err, transient) }), recordSleeps(new([]time.Duration)))
	require.ErrorIs(t, err, bad)
	require.Equal(t, 2, calls)
}

func TestRetryAfterOverridesTheDelayCappedAtMax(t *testing.T) {
	t.Parallel()
	p := testPolicy()
	var delays []time.Duration
	calls := 0
	err := Do(context.Background(), p, func(ctx context.Context) error {
		calls++
		switch calls {
		case 1:
			return client.RetryAfter(errors.New("429"), 3*time.Second)
		case 2:
			return client.RetryAfter(errors.New("429"), time.Hour)
		}
		return nil
	}, recordSleeps(&delays))
	require.NoError(t, err)
	require.Equal(t, []time.Duration{3 * time.Second, p.Max}, delays)
}

func TestRetryTimedOutAttemptIsNotRetriedByDefault(t *testing.T) {
	t.Parallel()
	calls := 0
	hang := func(ctx context.Context) error {
		calls++
		<-ctx.Done()
		return ctx.Err()
	}
	err := Do(context.Background(), testPolicy(), hang, AttemptTimeout(20*time.Millisecond), recordSleeps(new([]time.Duration)))
	require.ErrorIs(t, err, ErrAttemptTimeout)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.ErrorContains(t, err, "not retried")
	require.Equal(t, 1, calls)

	// With Timeouts, a timed-out attempt is retried like any failure.
	calls = 0
	err = Do(context.Background(), testPolicy(), func(ctx context.Context) error {
		if calls++; calls < 3 {
			return hang(ctx)
		}
		return nil
	}, AttemptTimeout(20*time.Millisecond), Timeouts(), recordSleeps(new([]time.Duration)))
	require.NoError(t, err)
	require.Equal(t, 3, calls)
}

func TestRetryRespectsTheDeadline(t *testing.T) {
	t.Parallel()
	p := testPolicy()
	p.Jitter = policy.JitterNone
	p.Base = time.Second
	p.Deadline = 2500 * time.Millisecond
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	var delays []time.Duration
	calls := 0
	err := Do(context.Background(), p, func(ctx context.Context) error {
		calls++
		return errors.New("down")
	}, Clock(clock), Sleep(func(ctx context.Context, d time.Duration) error {
		delays = append(delays, d)
		now = now.Add(d) // the fake clock advances by the wait
		return nil
	}))
	// Delays 1s, 2s: the second would end at 3s > 2.5s deadline.
	require.ErrorContains(t, err, "deadline")
	require.Equal(t, []time.Duration{time.Second}, delays)
	require.Equal(t, 2, calls)
}

func TestRetryStopsWhenTheContextEnds(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	err := Do(ctx, testPolicy(), func(ctx context.Context) error {
		calls++
		cancel()
		return errors.New("x")
	}, recordSleeps(new([]time.Duration)))
	require.ErrorIs(t, err, context.Canceled)
	require.Equal(t, 1, calls)
}

func TestRetryRefusesAnInvalidPolicy(t *testing.T) {
	t.Parallel()
	err := Do(context.Background(), policy.Policy{}, func(context.Context) error { return nil })
	require.ErrorIs(t, err, client.ErrInvalidArgument)
}

func TestNotifySeesEachFailure(t *testing.T) {
	t.Parallel()
	var seen []int
	_ = Do(context.Background(), testPolicy(), func(context.Context) error { return errors.New("x") },
		Notify(func(attempt int, err error, d time.Duration) { seen = append(seen, attempt) }),
		recordSleeps(new([]time.Duration)))
	require.Equal(t, []int{1, 2, 3}, seen)
}
