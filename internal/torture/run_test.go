package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pgbackoff/pgbackoff/internal/pgserver"
)

// sessions is how many clients call at once: enough for every call to
// meet others on two cores.
const sessions = 6

// checkEvery is how often the invariants are checked while the run goes
// on, so that a violation is reported soon after it happens.
const checkEvery = 10 * time.Second

// run is one isolation level's run against a fresh database.
type run struct {
	lvl      level
	seed     uint64
	srv      *pgserver.Server
	restarts bool // the server can be restarted
	firer    string
	clock    *simClock
	began    time.Time
	rec      record
	board    board

	mu       sync.Mutex
	url      string
	findings []string // unexpected errors of calls
	harness  []error  // failures of the test's own machinery

	kills, switches, truncations, restartCount, reads, added atomic.Int64
}

func (r *run) since() time.Duration { return time.Since(r.began) }

func (r *run) dbURL() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.url
}

// serverMoved points the database URL at the server's address after a
// restart (a container's published port may change).
func (r *run) serverMoved() {
	r.mu.Lock()
	defer r.mu.Unlock()
	srv, err1 := url.Parse(r.srv.URL)
	db, err2 := url.Parse(r.url)
	if err1 == nil && err2 == nil {
		db.Host = srv.Host
		r.url = db.String()
	}
}

func (r *run) finding(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.findings) < 1000 {
		r.findings = append(r.findings, s)
	}
}

func (r *run) harnessError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.harness = append(r.harness, err)
}

// result is what a run ends with.
type result struct {
	counts
	elapsed    time.Duration
	violations []string
	foundAfter time.Duration // when the first violation was seen
}

// driveAndFinish runs the sessions, the killer, the restarter and the
// periodic checks for d, or until a check finds a violation; then one
// more fire_schedules call on the database clock, alone, and the final
// check.
func (r *run) driveAndFinish(ctx context.Context, d time.Duration) result {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	r.began = time.Now()
	var wg sync.WaitGroup
	all := make([]*session, sessions)
	for i := range all {
		s := &session{id: i + 1, run: r, lvl: r.lvl, rng: rand.New(rand.NewPCG(r.seed, uint64(i+1)))}
		all[i] = s
		wg.Go(func() {
			defer s.drop(context.Background())
			for ctx.Err() == nil {
				s.step(ctx)
			}
		})
	}
	wg.Go(func() { r.killer(ctx, rand.New(rand.NewPCG(r.seed, 100))) })
	wg.Go(func() { r.reader(ctx, rand.New(rand.NewPCG(r.seed, 102))) })
	if r.restarts {
		wg.Go(func() { r.restarter(ctx, rand.New(rand.NewPCG(r.seed, 101))) })
	}

	var res result
	deadline := time.After(d)
	tick := time.NewTicker(checkEvery)
	defer tick.Stop()
loop:
	for {
		select {
		case <-deadline:
			break loop
		case <-tick.C:
			if v := r.check(ctx, false); len(v) > 0 {
				res.violations, res.foundAfter = v, r.since()
				break loop
			}
		}
	}
	stop()
	wg.Wait()
	res.elapsed = r.since()
	for _, s := range all {
		res.counts.add(s.stats)
	}
	if res.violations == nil {
		last := &session{id: 0, run: r, lvl: r.lvl, rng: rand.New(rand.NewPCG(r.seed, 0))}
		for try := 0; try < maxTries && !last.fireOn(context.Background(), true); try++ {
			time.Sleep(100 * time.Millisecond)
		}
		last.drop(context.Background())
		res.violations = r.check(context.Background(), true)
		if len(res.violations) > 0 {
			res.foundAfter = res.elapsed
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res.violations = append(res.violations, r.findings...)
	if len(res.violations) > 0 && res.foundAfter == 0 {
		res.foundAfter = res.elapsed
	}
	return res
}

func (r *run) String() string {
	return fmt.Sprintf("%s seed=%d", r.lvl.name, r.seed)
}
