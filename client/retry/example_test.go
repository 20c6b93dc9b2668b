package retry_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/pgbackoff/pgbackoff/client/policy"
	"github.com/pgbackoff/pgbackoff/client/retry"
)

// In-process retries of a plain function, with the same backoff math as
// the database and a per-attempt timeout.
func ExampleDo() {
	p := policy.Profiles()["aggressive"]
	calls := 0
	err := retry.Do(context.Background(), p, func(ctx context.Context) error {
		calls++
		if calls < 3 {
			return errors.New("connection refused")
		}
		return nil
	},
		retry.AttemptTimeout(2*time.Second),
		retry.Notify(func(attempt int, err error, delay time.Duration) {
			fmt.Printf("attempt %d failed (%v); next in at most %s\n", attempt, err, p.Max)
		}),
		retry.Sleep(func(context.Context, time.Duration) error { return nil }), // tests only: skip the wait
	)
	fmt.Println("calls:", calls, "err:", err)
	// Output:
	// attempt 1 failed (connection refused); next in at most 10s
	// attempt 2 failed (connection refused); next in at most 10s
	// calls: 3 err: <nil>
}
