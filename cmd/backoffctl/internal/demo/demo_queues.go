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
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/cli"
)

// The demo's three queues and their simulated downstreams. A job's fate is
// drawn at enqueue time from --seed (poison or not) and, for each attempt,
// from (seed, job id, attempt): a run is reproducible up to timing (which
// requests the rate limiter refuses depends on the clock).

// demoPayload is a demo job's payload.
type demoPayload struct {
	N      int    `json:"n"`
	Fate   string `json:"fate"` // ok, poison or stuck
	Target string `json:"target"`
}

// demoCounts are a queue's handler outcomes.
type demoCounts struct {
	attempts, ok, transient, rateLimited, poison int64
}

// demoQueue is one queue of the demo: its jobs and its handler.
type demoQueue struct {
	name     string
	what     string // what its handler simulates
	enqueued int
	payloads []demoPayload
	seed     uint64

	transientRate float64 // chance an attempt fails with a transient error
	transient     []string
	poisonErr     func(p demoPayload) string
	limiter       *demoLimiter // nil: no rate limit

	nAttempts, nOK, nTransient, nRateLimited, nPoison atomic.Int64
}

func (q *demoQueue) counts() demoCounts {
	return demoCounts{q.nAttempts.Load(), q.nOK.Load(), q.nTransient.Load(), q.nRateLimited.Load(), q.nPoison.Load()}
}

// newDemoQueues splits jobs across emails, webhooks and reports.
func newDemoQueues(jobs int, seed uint64) []*demoQueue {
	qs := []*demoQueue{
		{
			name: "emails", what: "SMTP: 20% transient, 2% bad addresses",
			transientRate: 0.20,
			transient: []string{
				"421 4.7.0 mx1.example.net: too many connections, try again later",
				"dial tcp 203.0.113.25:25: i/o timeout",
				"451 4.3.0 temporary local problem, please retry",
			},
			poisonErr: func(p demoPayload) string {
				return fmt.Sprintf("550 5.1.3 bad recipient address syntax <%s>", p.Target)
			},
		},
		{
			name: "webhooks", what: "rate-limited to 400/s with Retry-After, 5% transient, 1% gone",
			transientRate: 0.05,
			transient: []string{
				"POST https://hooks.example.com/in: 503 Service Unavailable",
				"POST https://hooks.example.com/in: read: connection reset by peer",
			},
			poisonErr: func(p demoPayload) string {
				return fmt.Sprintf("POST %s: 410 Gone: this endpoint was deleted", p.Target)
			},
			limiter: newDemoLimiter(400, 20),
		},
		{
			name: "reports", what: "25% transient, 1% corrupt input, 0.5% always time out",
			transientRate: 0.25,
			transient: []string{
				"ERROR: canceling statement due to statement timeout (SQLSTATE 57014)",
				"ERROR: deadlock detected (SQLSTATE 40P01)",
				"GET s3://reports/input.csv: context deadline exceeded",
			},
			poisonErr: func(p demoPayload) string {
				return fmt.Sprintf("parse %s: line 17: unexpected EOF in quoted field", p.Target)
			},
		},
	}
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	for i, q := range qs {
		q.seed = seed
		q.enqueued = jobs / len(qs)
		if i < jobs%len(qs) {
			q.enqueued++
		}
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
	if q.limiter != nil {
		if wait, ok := q.limiter.admit(job.ID, time.Now()); !ok {
			q.nRateLimited.Add(1)
			// The downstream says when to come back; the policy caps it.
			return client.RetryAfter(fmt.Errorf("POST %s: 429 Too Many Requests (Retry-After: %s)", p.Target, cli.FormatDelay(wait)), wait)
		}
	}
	switch {
	case p.Fate == "poison":
		q.nPoison.Add(1)
		return client.Permanent(errors.New(q.poisonErr(p)))
	case p.Fate == "stuck" || r.Float64() < q.transientRate:
		q.nTransient.Add(1)
		return errors.New(q.transient[r.IntN(len(q.transient))])
	}
	q.nOK.Add(1)
	return nil
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

// demoLimiter is the rate-limited downstream: a generic cell rate algorithm
// (rate per second, burst) that answers a refused request with the time its
// turn comes, and keeps that turn for it, the way an API that sends precise
// Retry-After values behaves.
type demoLimiter struct {
	mu       sync.Mutex
	interval time.Duration // between two admitted requests
	burst    time.Duration // how far ahead of now the schedule may run
	tat      time.Time     // theoretical arrival time of the next request
	turns    map[int64]time.Time
}

func newDemoLimiter(perSecond, burst int) *demoLimiter {
	iv := time.Second / time.Duration(perSecond)
	return &demoLimiter{interval: iv, burst: time.Duration(burst) * iv, turns: map[int64]time.Time{}}
}

// admit reports whether job id may call now; if not, how long to wait.
func (l *demoLimiter) admit(id int64, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if turn, ok := l.turns[id]; ok {
		if !now.Before(turn.Add(-10 * time.Millisecond)) {
			delete(l.turns, id)
			return 0, true
		}
		return turn.Sub(now), false
	}
	if l.tat.Before(now) {
		l.tat = now
	}
	if l.tat.Sub(now) <= l.burst {
		l.tat = l.tat.Add(l.interval)
		return 0, true
	}
	turn := l.tat
	l.tat = l.tat.Add(l.interval)
	l.turns[id] = turn
	return turn.Sub(now), false
}
