package torture

import (
	"sync/atomic"
	"time"
)

// simClock is the time the job calls pass as p_now. It moves on by a
// little at every call, not with the wall clock, so that leases and
// backoffs come due after a number of calls whatever the machine's load: a
// session stalled for seconds by a busy machine sees no lease run out
// because of the stall, and retries come due without anyone sleeping.
// Schedules are fired on the database's clock instead (see fire.go's
// callers), so the two never meet.
type simClock struct {
	start time.Time
	us    atomic.Int64 // microseconds past start
}

func newSimClock(start time.Time) *simClock {
	return &simClock{start: start.Truncate(time.Second)}
}

// tick moves the clock on by d and returns the new time.
func (c *simClock) tick(d time.Duration) time.Time {
	return c.start.Add(time.Duration(c.us.Add(d.Microseconds())) * time.Microsecond)
}
