// Package retry retries a function in-process under a pgbackoff policy,
// for work that need not be durable: the same delays as the database
// (policy.Policy.Delay), without a job. Errors classified with
// client.Permanent and client.RetryAfter mean here what they mean to a
// Worker (docs/adr/0029-client-namespace.md).
package retry

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/policy"
)

// ErrAttemptTimeout is the cause of an attempt that ran past Do's
// per-attempt timeout (AttemptTimeout).
var ErrAttemptTimeout = errors.New("pgbackoff: attempt timed out")

// Option configures Do.
type Option func(*config)

type config struct {
	timeout       time.Duration
	retryTimeouts bool
	retryIf       func(error) bool
	seed          int64
	seeded        bool
	sleep         func(ctx context.Context, d time.Duration) error
	now           func() time.Time
	onRetry       func(attempt int, err error, delay time.Duration)
}

// AttemptTimeout bounds each attempt: fn's context is cancelled after d
// (context.Cause: ErrAttemptTimeout). A timed-out attempt ends the retries
// with an error wrapping ErrAttemptTimeout, unless Timeouts is given.
func AttemptTimeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// Timeouts makes timed-out attempts retryable like any other failure.
// By default they are not: an operation that hung once has usually already
// used the caller's patience, and may still be running somewhere.
func Timeouts() Option { return func(c *config) { c.retryTimeouts = true } }

// If retries only errors for which pred returns true; others are
// returned at once. Permanent errors are never retried, whatever pred says.
func If(pred func(error) bool) Option { return func(c *config) { c.retryIf = pred } }

// Seed fixes the jitter seed (default: random per call, so that
// concurrent callers spread out). With a fixed seed the delays are exactly
// those a job with that id gets from backoff.retry_delay.
func Seed(seed int64) Option {
	return func(c *config) { c.seed, c.seeded = seed, true }
}

// Sleep replaces the wait between attempts (default: a timer that
// ctx interrupts). Tests pass a function that records d and returns at once.
func Sleep(sleep func(ctx context.Context, d time.Duration) error) Option {
	return func(c *config) { c.sleep = sleep }
}

// Clock replaces the clock that the policy's Deadline is measured
// with (default time.Now).
func Clock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// Notify is called before each wait with the attempt that failed, its
// error and the delay before the next one: a hook for logs and metrics.
func Notify(fn func(attempt int, err error, delay time.Duration)) Option {
	return func(c *config) { c.onRetry = fn }
}

// Do calls fn until it succeeds, for work that need not be durable: the
// same policy math as the database (p.Delay(attempt, seed)), in-process.
//
// It makes at most p.MaxAttempts attempts and waits p.Delay(n, seed) after
// failed attempt n; an error made with client.RetryAfter waits its own delay
// instead (capped at p.Max). It stops early, returning the error, when fn
// returns nil, a client.Permanent error, an error If rejects, a timed-out
// attempt (see AttemptTimeout, Timeouts), when the next attempt would
// start after p.Deadline (measured from the call), or when ctx ends. After
// the last attempt it returns the last error, wrapped with the attempt
// count; errors.Is and errors.As see the original.
//
// fn must return when its context is cancelled: Do waits for it.
func Do(ctx context.Context, p policy.Policy, fn func(ctx context.Context) error, opts ...Option) error {
	if err := p.Validate(); err != nil {
		return fmt.Errorf("retry: %w: %w", client.ErrInvalidArgument, err)
	}
	cfg := config{sleep: sleepContext, now: time.Now}
	for _, o := range opts {
		o(&cfg)
	}
	if !cfg.seeded {
		cfg.seed = rand.Int64()
	}
	start := cfg.now()
	for attempt := 1; ; attempt++ {
		err, timedOut := runAttempt(ctx, cfg.timeout, fn)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("retry: attempt %d: %w", attempt, errors.Join(err, context.Cause(ctx)))
		}
		switch {
		case timedOut && !cfg.retryTimeouts:
			return fmt.Errorf("retry: attempt %d timed out after %s (not retried): %w", attempt, cfg.timeout, err)
		case client.IsPermanent(err):
			return fmt.Errorf("retry: attempt %d: %w", attempt, err)
		case cfg.retryIf != nil && !cfg.retryIf(err):
			return fmt.Errorf("retry: attempt %d (not retryable): %w", attempt, err)
		case attempt >= p.MaxAttempts:
			return fmt.Errorf("retry: gave up after %d attempts: %w", attempt, err)
		}
		delay := p.Delay(attempt, cfg.seed)
		if d, ok := client.RetryAfterDelay(err); ok {
			delay = min(d, p.Max)
		}
		if p.Deadline > 0 && cfg.now().Add(delay).After(start.Add(p.Deadline)) {
			return fmt.Errorf("retry: attempt %d: next attempt would pass the %s deadline: %w", attempt, p.Deadline, err)
		}
		if cfg.onRetry != nil {
			cfg.onRetry(attempt, err, delay)
		}
		if serr := cfg.sleep(ctx, delay); serr != nil {
			return fmt.Errorf("retry: waiting after attempt %d: %w", attempt, errors.Join(err, serr))
		}
	}
}

// runAttempt calls fn under the per-attempt timeout and reports whether the
// timeout (rather than fn on its own) ended it.
func runAttempt(ctx context.Context, timeout time.Duration, fn func(context.Context) error) (err error, timedOut bool) {
	actx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeoutCause(ctx, timeout, ErrAttemptTimeout)
		defer cancel()
	}
	err = fn(actx)
	if err != nil && timeout > 0 && errors.Is(context.Cause(actx), ErrAttemptTimeout) {
		return fmt.Errorf("%w: %w", ErrAttemptTimeout, err), true
	}
	return err, false
}

func sleepContext(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}
