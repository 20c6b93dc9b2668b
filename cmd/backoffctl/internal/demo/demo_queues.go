package demo

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgbackoff/pgbackoff/client"
)

// The demo's three queues and their simulated downstreams. A job's fate is
// drawn at enqueue time from --seed (poison or not) and, for each attempt,
// from (seed, job id, attempt): a run is reproducible up to timing (which
// calls fall in the webhook downstream's outage depends on the clock).
// Every error is one the simulated downstream would give (an SMTP reply, an
// HTTP status with the endpoint, a storage service's message), never one
// of PostgreSQL: the demo's database does not fail.

// stuckTimeout is how long a call to a downstream that never answers waits.
const stuckTimeout = 50 * time.Millisecond

// demoPayload is a demo job's payload.
type demoPayload struct {
	N      int    `json:"n"`
	Fate   string `json:"fate"` // ok, poison or stuck
	Target string `json:"target"`
}

// demoCounts are a queue's handler outcomes.
type demoCounts struct {
	attempts, ok, transient, down, poison int64
}

// demoQueue is one queue of the demo: its jobs and its handler.
type demoQueue struct {
	name       string
	what       string // what its handler simulates
	downstream string // the host it calls
	share      int    // its part of --jobs, in 96ths
	enqueued   int
	payloads   []demoPayload
	seed       uint64

	transientRate float64 // chance an attempt fails with a transient error
	transient     []func(p demoPayload) string
	timeout       func(p demoPayload) string // the error of a stuck job
	poisonErr     func(p demoPayload) string
	outage        *demoOutage // nil: its downstream is never down

	nAttempts, nOK, nTransient, nDown, nPoison atomic.Int64
	nRefused                                   atomic.Int64           // claims its rate limit refused (holdCounter)
	lastErr                                    atomic.Pointer[string] // of the last retryable failure
	breaker                                    breakerLog
	calls                                      demoCalls
}

func (q *demoQueue) counts() demoCounts {
	return demoCounts{q.nAttempts.Load(), q.nOK.Load(), q.nTransient.Load(), q.nDown.Load(), q.nPoison.Load()}
}

// newDemoQueues splits jobs across emails, webhooks and reports. The
// webhooks queue gets a 96th: its rate limit (examples/backoff.toml, env
// demo: 10/s) makes it last about as long as the others.
func newDemoQueues(jobs int, seed uint64) []*demoQueue {
	qs := []*demoQueue{
		{
			name: "emails", downstream: "mx1.example.net", what: "SMTP: 20% transient, 2% bad addresses", share: 47,
			transientRate: 0.20,
			transient: []func(demoPayload) string{
				func(demoPayload) string { return "421 4.7.0 mx1.example.net: too many connections, try again later" },
				func(demoPayload) string { return "mx1.example.net: dial tcp 203.0.113.25:25: i/o timeout" },
				func(demoPayload) string { return "451 4.3.0 mx1.example.net: temporary local problem, please retry" },
			},
			poisonErr: func(p demoPayload) string {
				return fmt.Sprintf("550 5.1.3 mx1.example.net: bad recipient address syntax <%s>", p.Target)
			},
		},
		{
			// No transient errors: every failure that counts toward its
			// breaker is the outage's.
			name: "webhooks", downstream: "hooks.example.com", what: "hooks.example.com: down (503) for 1s and 6 calls a quarter of the way in, 1% gone", share: 1,
			poisonErr: func(p demoPayload) string {
				return fmt.Sprintf("POST %s: 410 Gone: this endpoint was deleted", p.Target)
			},
		},
		{
			name: "reports", downstream: "s3://reports", what: "object storage: 25% transient, 1% corrupt input, 0.5% always time out", share: 48,
			transientRate: 0.25,
			transient: []func(demoPayload) string{
				func(p demoPayload) string {
					return "GET " + p.Target + ": 503 SlowDown: Please reduce your request rate."
				},
				func(p demoPayload) string {
					return "GET " + p.Target + ": 500 InternalError: We encountered an internal error. Please try again."
				},
				func(p demoPayload) string {
					return "PUT " + p.Target + ".pdf: 400 RequestTimeout: Your socket connection to the server was not read from or written to within the timeout period."
				},
			},
			timeout: func(p demoPayload) string {
				return "GET " + p.Target + ": context deadline exceeded (timeout " + stuckTimeout.String() + ")"
			},
			poisonErr: func(p demoPayload) string {
				return fmt.Sprintf("parse %s: line 17: unexpected EOF in quoted field", p.Target)
			},
		},
	}
	// Each queue gets at least one job: the demo accounts for every queue.
	left := jobs
	for i, q := range qs {
		q.seed = seed
		if i == len(qs)-1 {
			q.enqueued = left
		} else {
			q.enqueued = max(1, jobs*q.share/96)
		}
		left -= q.enqueued
	}
	qs[1].outage = &demoOutage{after: int64(qs[1].enqueued / 4), length: time.Second, atLeast: int64(min(6, qs[1].enqueued))}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	for _, q := range qs {
		for n := 1; n <= q.enqueued; n++ {
			p := demoPayload{N: n, Fate: "ok"}
			x := r.Float64()
			switch q.name {
			case "emails":
				p.Target = fmt.Sprintf("user%d@example.com", n)
				if x < 0.02 {
					p.Fate, p.Target = "poison", fmt.Sprintf("user%d@@example", n)
				}
			case "webhooks":
				p.Target = fmt.Sprintf("https://hooks.example.com/in/%d", n%50)
				if x < 0.01 {
					p.Fate = "poison"
				}
			default:
				p.Target = fmt.Sprintf("s3://reports/%d.csv", n)
				if x < 0.01 {
					p.Fate = "poison"
				} else if x < 0.015 {
					p.Fate = "stuck"
				}
			}
			q.payloads = append(q.payloads, p)
		}
	}
	return qs
}

// handle is the queue's client.Handler.
func (q *demoQueue) handle(ctx context.Context, job *client.Job) error {
	q.nAttempts.Add(1)
	var p demoPayload
	if err := job.UnmarshalPayload(&p); err != nil {
		q.nPoison.Add(1)
		return client.Permanent(err)
	}
	// The call to the downstream: a few milliseconds.
	r := rand.New(rand.NewPCG(q.seed^uint64(job.ID), uint64(job.Token)))
	if err := sleepCtx(ctx, time.Duration(1+r.IntN(3))*time.Millisecond); err != nil {
		return err
	}
	now := time.Now()
	q.calls.add(now)
	if q.outage != nil && q.outage.down(now) {
		q.nDown.Add(1)
		// The downstream says when to come back; the policy caps it.
		return client.RetryAfter(q.failed(fmt.Sprintf("POST %s: 503 Service Unavailable (Retry-After: 1)", p.Target)), time.Second)
	}
	switch {
	case p.Fate == "poison":
		q.nPoison.Add(1)
		return client.Permanent(errors.New(q.poisonErr(p)))
	case p.Fate == "stuck":
		// The downstream never answers: the call gives up at its timeout.
		if err := sleepCtx(ctx, stuckTimeout); err != nil {
			return err
		}
		q.nTransient.Add(1)
		return q.failed(q.timeout(p))
	case r.Float64() < q.transientRate:
		q.nTransient.Add(1)
		return q.failed(q.transient[r.IntN(len(q.transient))](p))
	}
	q.nOK.Add(1)
	q.breaker.succeeded(now)
	return nil
}

// failed is a retryable failure's error, noted as the queue's last.
func (q *demoQueue) failed(msg string) error {
	q.lastErr.Store(&msg)
	return errors.New(msg)
}

// lastError is the error of the queue's last retryable failure.
func (q *demoQueue) lastError() string {
	if s := q.lastErr.Load(); s != nil {
		return *s
	}
	return "-"
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return nil
	}
}

// demoOutage is a downstream that goes down once it has answered `after`
// calls and stays down for `length` and at least `atLeast` calls, answering
// 503 to every call: a window fixed in calls and time, not in throughput,
// so the queue's breaker opens (and closes again) on a fast machine as on
// a slow one, where calls are few and their failures reach the database
// at once (concurrent fails do not count each other).
type demoOutage struct {
	after   int64
	length  time.Duration
	atLeast int64

	mu          sync.Mutex
	calls       int64
	refused     int64
	from, until time.Time // zero until it went down
}

// down counts a call at now and reports whether the downstream refuses it.
func (o *demoOutage) down(now time.Time) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls++
	if o.from.IsZero() {
		if o.calls <= o.after {
			return false
		}
		o.from, o.until = now, now.Add(o.length)
	}
	if now.Before(o.until) || o.refused < o.atLeast {
		o.refused++
		if o.until.Before(now) {
			o.until = now
		}
		return true
	}
	return false
}

// window is when the downstream was down; zero times before it went down.
func (o *demoOutage) window() (from, until time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.from, o.until
}

// demoCalls counts the calls a queue's handler made to its downstream in
// each second since the first.
type demoCalls struct {
	mu        sync.Mutex
	first     time.Time
	perSecond []int64
}

func (c *demoCalls) add(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.first.IsZero() {
		c.first = now
	}
	s := int(now.Sub(c.first) / time.Second)
	for len(c.perSecond) <= s {
		c.perSecond = append(c.perSecond, 0)
	}
	c.perSecond[s]++
}

// busiest is the most calls made within one of those seconds.
func (c *demoCalls) busiest() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n int64
	for _, v := range c.perSecond {
		n = max(n, v)
	}
	return n
}
