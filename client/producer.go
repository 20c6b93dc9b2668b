package client

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"
)

// producer claims the jobs of one queue into its free handler slots.
//
// It claims whenever a slot is free and the queue was not found empty:
// a finished handler frees a slot and triggers the next claim at once, and
// a claim that comes back short is not a reason to wait (under concurrency
// SKIP LOCKED and rows re-checked after another claimer's commit make short
// batches common on a busy queue). Only a claim that returns nothing backs
// off: the queue is then idle, the producer registers that it waits for it
// (notifier.go), looks once more, and sleeps until a notification, a
// reaped lease or the poll interval wakes it. The registration ends when
// two claims in a row find jobs (a backlog: the queue is busy) or, for a
// worker that died, when it expires. While registered, a claim that comes
// back short on a queue without controls is the whole look: every job
// enqueued since notifies, so the producer waits for that instead of a
// claim that would find nothing (trickle).
//
// A queue's controls (ADR 0045) can make a claim return nothing while
// jobs are due: an open breaker, or a rate limit out of tokens. So a claim
// that returns nothing is followed by one backoff.queue_state call; when
// its next_claim_at is ahead, the producer holds the queue until then: it
// claims nothing, ignores notifications, polls and freed slots, ends its
// idle registration (enqueuers need not wake a held queue), and a timer
// wakes it (docs/adr/0047-worker-learns-when-to-claim.md). A claim that
// returns jobs costs no extra call.
type producer struct {
	w        *Worker
	cfg      QueueConfig
	wake     chan struct{} // a notification or a reap: look for work now
	freed    chan struct{} // a handler slot became free
	inflight atomic.Int64
	idle     bool // a claim found nothing since the last backlog; registered as waiting
	streak   int  // claims in a row that found jobs
	// holdUntil is when the queue's controls let a claim return jobs again
	// (on the client's clock); zero when nothing holds it.
	holdUntil time.Time
	hold      *time.Timer // fires at holdUntil; nil when not held
	halfOpen  bool        // the last state read was a half-open breaker
	// awaitProbe: the breaker is half open with every probe out; no time
	// ends that, a probe's result does. Wake-ups are ignored; a freed
	// slot (maybe the probe's, failed), a completion of the queue
	// committed by the completer (settled) or the poll ends it.
	awaitProbe bool
	settled    chan struct{}
	// uncontrolled: the last state read (after the last claim that found
	// nothing) showed neither a rate limit nor a breaker out of its closed
	// state, so a short claim means the queue is drained (see trickle).
	uncontrolled bool
	// stateFailed: a queue_state read failed before (logged once).
	stateFailed bool
	// lookAgain: the state read after an empty claim found a rate-limited
	// queue with a token, so claim once more; lookedAgain: that was done
	// since the last claim that found jobs.
	lookAgain, lookedAgain bool
	// drained: the last claim found the queue drained (nothing due, no
	// controls holding it); parked: drained and waiting for the Worker's
	// look, a notification or a freed slot instead of its own poll
	// (look.go), read by the look to know which queues to ask about.
	drained bool
	parked  atomic.Bool
	// moved: the queue's claims go to another shard now (direct mode,
	// direct.go): what the producer knew of the old shard (its wake-up
	// registration, a hold by the controls there) is forgotten.
	moved atomic.Bool
}

func newProducer(w *Worker, cfg QueueConfig) *producer {
	return &producer{w: w, cfg: cfg, wake: make(chan struct{}, 1), freed: make(chan struct{}, 1), settled: make(chan struct{}, 1)}
}

func (p *producer) run(ctx context.Context) {
	newTicker := p.w.newPollTicker
	if newTicker == nil {
		newTicker = realTicker
	}
	poll := newTicker(p.w.cfg.PollInterval)
	defer poll.Stop()
	defer p.release()
	empty := false // the queue had nothing due at the last look
	for ctx.Err() == nil {
		if p.moved.Swap(false) {
			p.release()
			p.idle, p.streak, p.awaitProbe, p.halfOpen, p.lookAgain, p.lookedAgain = false, 0, false, false, false, false
		}
		wasHeld := !p.holdUntil.IsZero()
		if p.held() || p.awaitProbe {
			empty = true
		} else if wasHeld {
			// The hold ended on the clock before its timer was selected
			// (a short wait, or an injected clock): claim now, or nothing
			// but a wake-up or the poll would.
			empty = false
		}
		if free := p.cfg.Concurrency - int(p.inflight.Load()); free > 0 && !empty {
			want := min(free, p.cfg.BatchSize)
			p.drained = false
			n, err := p.claim(ctx, want)
			if n == 0 {
				p.streak = 0
			} else {
				p.streak++
			}
			switch {
			case err != nil:
				p.w.log.Error("claim failed", "queue", p.cfg.Queue, "err", err)
				empty = true // wait for the poll before trying again
			case n > 0:
				p.lookedAgain = false
				// Two claims in a row that found jobs mean a backlog: the
				// queue is busy, so enqueuers need not wake it. A trickle
				// (one claim finds the job, the next finds nothing) keeps
				// the registration and writes nothing.
				if p.idle && p.streak >= 2 {
					p.idle = false
					p.w.notifier.setWaiting(ctx, p.cfg.Queue, false)
				}
				if n < want && p.trickle() {
					// The claim took everything due and the producer is
					// still registered: wait for the next notification
					// instead of a claim that would find nothing.
					empty = true
					p.drained = true
					break
				}
				continue
			case p.controlled(ctx):
				// The breaker or the rate limit holds the queue: wait for
				// the timer, whatever wakes the producer before.
				empty = true
			case p.lookAgain:
				p.lookAgain = false
				continue
			case !p.idle && p.w.notifier.listening():
				// Empty: register as waiting, then look once more, for a
				// job enqueued before the registration was visible.
				p.idle = true
				p.w.notifier.setWaiting(ctx, p.cfg.Queue, true)
				continue
			default:
				empty = true
				p.drained = true
			}
		}
		var timer <-chan time.Time
		if p.hold != nil {
			timer = p.hold.C
		}
		// A drained queue leaves its poll to the Worker's look, which
		// wakes it when a job comes due (and renews its registration).
		pollC := poll.C
		parked := empty && p.drained && p.w.lookOn()
		if parked {
			pollC = nil
		}
		p.parked.Store(parked)
		select {
		case <-ctx.Done():
		case <-p.wake:
			empty = false
		case <-pollC:
			empty = false
			p.awaitProbe = false
			if p.idle {
				p.w.notifier.refresh(ctx, p.cfg.Queue)
			}
		case <-p.freed:
			// A half-open breaker waits for a probe's result: the slot
			// freed may be that result.
			if p.halfOpen {
				empty = false
				p.awaitProbe = false
			}
		case <-p.settled:
			// A completion of this queue is committed: maybe the probe's,
			// which closed the breaker.
			if p.awaitProbe {
				empty = false
				p.awaitProbe = false
			}
		case <-timer:
			// The wait the database gave has passed: claim, even if an
			// injected clock stands still.
			p.release()
			empty = false
		}
		p.parked.Store(false)
	}
}

// controlled is called after a claim returned nothing: it reads the
// queue's state and reports whether its controls hold it (next_claim_at
// ahead), and if so arms the timer that ends the hold. A failed read holds
// nothing: the producer then waits as for an idle queue.
func (p *producer) controlled(ctx context.Context) bool {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The hold is counted from the clock read before the state: an
	// injected clock that moves during the read must not push the end of
	// the hold past next_claim_at (the state was read at the earlier time).
	readAt := p.w.c.clock()
	st, wait, err := p.w.queueClient(p.cfg.Queue).queueState(cctx, p.cfg.Queue)
	if err != nil {
		// Logged once as an error (a database without queue_state would
		// otherwise log it at every empty claim), then at debug level.
		if ctx.Err() == nil {
			level := slog.LevelError
			if p.stateFailed {
				level = slog.LevelDebug
			}
			p.w.log.Log(ctx, level, "read queue state failed; the queue is treated as idle", "queue", p.cfg.Queue, "err", err)
			p.stateFailed = true
		}
		p.uncontrolled = false
		return false
	}
	p.halfOpen = st.State == "half_open"
	p.uncontrolled = st.State == "closed" && st.Rate == nil
	if p.halfOpen && st.ProbesLeft != nil && *st.ProbesLeft == 0 && wait <= 0 {
		p.awaitProbe = true
		p.unregister(ctx)
		return true
	}
	if wait <= 0 {
		// A rate-limited queue with a whole token now: the claim that found
		// nothing may have run just before the token came (one every few
		// milliseconds at a high rate), and no notification will say so.
		// Claim once more before calling the queue idle; a second empty
		// claim with tokens means nothing is due.
		p.lookAgain = st.Rate != nil && st.Tokens != nil && *st.Tokens >= 1 && !p.lookedAgain
		p.lookedAgain = p.lookAgain
		return false
	}
	p.release()
	p.holdUntil = readAt.Add(wait)
	p.hold = time.NewTimer(wait)
	p.w.log.Debug("queue held by its controls", "queue", p.cfg.Queue, "breaker", st.State, "wait", wait)
	p.unregister(ctx)
	return true
}

// trickle is called after a claim that came back short (fewer jobs than
// asked for) and reports whether the producer should wait for the next
// wake-up instead of claiming again at once (docs/adr/0051). Yes when the
// producer is registered as waiting (every job enqueued due since then
// notifies it), its queue showed no controls at the last state read (a
// short claim of a rate-limited queue or of a half-open breaker is not a
// drained queue: the claim that finds nothing next is what makes it read
// the state and wait for the right time) and no notification came while
// it claimed (jobs enqueued meanwhile: claim them now; a second claim that
// finds jobs ends the registration, as before). The claim it skips would
// have found nothing and cost a claim and a state read; the streak starts
// again, as after that empty claim.
func (p *producer) trickle() bool {
	if !p.idle || !p.uncontrolled || p.held() || p.awaitProbe {
		return false
	}
	select {
	case <-p.wake:
		return false
	default:
	}
	p.streak = 0
	return true
}

// unregister ends the idle registration of a held queue: its wake-ups
// are ignored, so enqueuers need not send them (a queue at its rate is a
// busy queue). The next claim that finds the queue empty and not held
// registers again.
func (p *producer) unregister(ctx context.Context) {
	if p.idle {
		p.idle = false
		p.w.notifier.setWaiting(ctx, p.cfg.Queue, false)
	}
}

// held reports whether the queue's controls still hold it. The hold ends
// when the client's clock reaches holdUntil, whichever comes first of that
// and the timer (a clock injected with WithClock may run ahead of it).
func (p *producer) held() bool {
	if p.holdUntil.IsZero() {
		return false
	}
	if p.w.c.clock().Before(p.holdUntil) {
		return true
	}
	p.release()
	return false
}

// release ends a hold and stops its timer.
func (p *producer) release() {
	if p.hold != nil {
		p.hold.Stop()
		p.hold = nil
	}
	p.holdUntil = time.Time{}
}

// claim takes up to n jobs and starts a handler for each; it returns how
// many it started.
func (p *producer) claim(ctx context.Context, n int) (int, error) {
	// Claim on a context that a shutdown does not cut: a claim committed
	// but never read would leave its jobs running until the reaper comes.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	jobs, err := p.w.queueClient(p.cfg.Queue).Claim(cctx, p.cfg.Queue, n, p.cfg.Lease)
	if err != nil {
		return 0, err
	}
	if p.w.direct != nil && len(jobs) < n {
		// A queue moved away gives no claims on its old shard: look
		// whether the layout changed (direct.go).
		p.w.direct.claimedShort()
	}
	if len(jobs) > 0 {
		p.w.claims.Add(1)
	}
	for i := range jobs {
		p.w.start(ctx, p, jobs[i])
	}
	return len(jobs), nil
}

// settle is called by the completer when it has committed completions of
// this queue: a producer waiting for a probe's result looks again. The
// signal is kept (one slot) if the producer is not waiting yet: a commit
// between its empty claim and its state read must still wake it.
func (p *producer) settle() { signal(p.settled) }

// done is called when a handler of this queue has returned and its
// outcome is recorded (or handed to the completer).
func (p *producer) done() {
	p.inflight.Add(-1)
	signal(p.freed)
}
