package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// maxPrinted is how many violations a run prints; the summary counts all.
const maxPrinted = 30

// TestTorture runs each isolation level asked for against a fresh
// database and ends with one summary line per level; any violation fails
// it, with the seed that replays the calls.
func TestTorture(t *testing.T) {
	if os.Getenv("TORTURE") == "" {
		t.Skip("the torture test runs only with TORTURE set (make torture)")
	}
	cfg, err := configFromEnv()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("torture: seed=%d (TORTURE_SEED=%d replays it) seconds=%d per isolation level\n",
		cfg.seed, cfg.seed, int(cfg.seconds.Seconds()))
	srv := testdb.Server(t)
	if !srv.Controllable() {
		fmt.Printf("torture: %s cannot be restarted by the test: the restarts are skipped, the kills are not\n", srv.Describe())
	}
	var summaries []string
	failed := false
	for _, lvl := range cfg.levels {
		r := &run{lvl: lvl, seed: cfg.seed, srv: srv, restarts: srv.Controllable(), url: testdb.NewURL(t)}
		res := r.prepareAndDrive(t, cfg.seconds)
		for i, v := range res.violations {
			if i == maxPrinted {
				fmt.Printf("torture: %s: ... and %d more violations\n", r, len(res.violations)-i)
				break
			}
			fmt.Printf("torture: %s: VIOLATION: %s\n", r, v)
		}
		for _, err := range r.harness {
			t.Errorf("torture: %s: %v", r, err)
		}
		line := fmt.Sprintf("torture: %s seed=%d seconds=%d calls=%d acknowledged=%d refused=%d uncertain=%d not-acknowledged=%d retries=%d kills=%d restarts=%d switches=%d truncations=%d reads=%d segments-added=%d violations=%d",
			lvl.name, cfg.seed, int(res.elapsed.Seconds()), res.calls, res.acknowledged, res.refused, res.uncertain,
			res.gaveUp+res.cut+res.unexpected, res.retries, r.kills.Load(), r.restartCount.Load(),
			r.switches.Load(), r.truncations.Load(), r.reads.Load(), r.added.Load(), len(res.violations))
		if len(res.violations) > 0 {
			failed = true
			line += fmt.Sprintf(" found-after=%.1fs", res.foundAfter.Seconds())
		}
		summaries = append(summaries, line)
	}
	fmt.Println(strings.Join(summaries, "\n"))
	if failed {
		t.Errorf("torture: violations found; replay with TORTURE_SEED=%d", cfg.seed)
	}
}

// prepareAndDrive sets the run's database up, drives it, and fires once
// more on the database clock with every session stopped before the final
// check, so that the last acknowledged call on that clock comes after all
// the others.
func (r *run) prepareAndDrive(t *testing.T, d time.Duration) result {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(r.seed, 0))
	conn, err := pgx.Connect(ctx, r.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	r.firer = fmt.Sprintf("torture_firer_%d", rand.Uint32())
	if _, err := conn.Exec(ctx, `CREATE ROLE `+pgx.Identifier{r.firer}.Sanitize()+` NOLOGIN`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), testdb.AdminURL(t)); err == nil {
			_, _ = c.Exec(context.Background(), `DROP ROLE IF EXISTS `+pgx.Identifier{r.firer}.Sanitize())
			c.Close(context.Background())
		}
	})
	segmentJobs, err := setup(ctx, conn, rng, r.firer)
	if err != nil {
		t.Fatal(err)
	}
	r.clock = newSimClock(time.Now())
	fmt.Printf("torture: %s: %d clients, segments of %d jobs, restarts %s\n", r.lvl.name, sessions, segmentJobs,
		map[bool]string{true: "on", false: "off"}[r.restarts])
	res := r.driveAndFinish(ctx, d)
	return res
}
