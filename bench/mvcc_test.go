package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// machineLine is the format of the closing block (targets.go).
var machineLine = regexp.MustCompile(`^(target [a-z0-9-]+: [0-9.]+ \(goal (>=|<=) [0-9.]+\) (met|MISS)|wal [a-z0-9-]+: ours [0-9]+ B/job, limit [0-9]+ B/job \(ratio [0-9.]+\))$`)

// TestMVCCSection runs only the held-snapshot section (-only=mvcc) at the
// test mode's size: every hold with both drivers (where the driver has
// such a run), an interval row per interval, and a closing block of
// exactly the targets and WAL lines of the runs made. The numbers mean
// nothing here.
func TestMVCCSection(t *testing.T) {
	cfg := Config{Mode: "test", DatabaseURL: testdb.AdminURL(t), Only: "mvcc"}
	require.NoError(t, cfg.setDefaults())
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), cfg, &out))
	text := out.String()
	t.Log(text)
	require.NotContains(t, text, "== throughput", "only the mvcc section")
	// Every hold with both drivers, but for a run a driver has no
	// maintenance for (cron) or a machine without pg_dump (dump).
	runs := 0
	var want []string
	for _, h := range mvccHolds {
		for _, d := range []string{"functions", "sql"} {
			head := "\n-- " + h.key + ", " + d + ": "
			require.Contains(t, text, head)
			if strings.Contains(text, head+h.about+" --") {
				runs++
			} else {
				continue
			}
			if d == "functions" && h.key != "free" {
				want = append(want, "target mvcc-"+h.key+"-vs-free")
				if h.targets {
					want = append(want, "target mvcc-"+h.key+"-backlog-s", "target mvcc-"+h.key+"-claim-p99-ratio")
				}
			}
		}
	}
	for _, h := range mvccHolds {
		if strings.Contains(text, "\n-- "+h.key+", sql: "+h.about+" --") {
			want = append(want, "wal mvcc-"+h.key)
		}
	}
	// n interval rows per run: time, then ten numbers.
	row := regexp.MustCompile(`(?m)^ +[0-9]+\.[0-9]s +[0-9]+ +[0-9]+ +-?[0-9]+ +[0-9.]+ms +[0-9.]+ms +[0-9]+ +[0-9]+ +[0-9.]+ +[0-9]+ +[0-9]+$`)
	n := mvccIntervals(cfg.MVCC, cfg.MVCCEvery)
	require.Len(t, row.FindAllString(text, -1), runs*n)
	require.Equal(t, runs, strings.Count(text, "\nrun: "))
	require.Contains(t, text, "held / free, completed/s of the last interval: functions ")
	require.Contains(t, text, "held-xid / free, completed/s of the last interval: functions ")

	block := text[strings.Index(text, "== targets (machine-readable) =="):]
	var names []string
	for _, l := range strings.Split(strings.TrimSpace(block), "\n")[1:] {
		require.Regexp(t, machineLine, l)
		names = append(names, strings.SplitN(l, ":", 2)[0])
	}
	require.ElementsMatch(t, want, names)
}

// A driver's setup runs before the load and its maintenance once a second
// during it (the maintenance writes into the table the setup made, so a
// missing setup fails the run); a held run really holds the horizon back:
// the oldest xid's age grows with the load's transactions, and the hold is
// found and terminated by name at the end (mvccRun fails otherwise).
func TestMVCCDriverSetupMaintenanceAndHold(t *testing.T) {
	cfg := Config{Mode: "test", DatabaseURL: testdb.AdminURL(t)}
	require.NoError(t, cfg.setDefaults())
	cfg.MVCCEvery = 1100 * time.Millisecond
	var out bytes.Buffer
	b, err := newBench(t.Context(), cfg, cfg.DatabaseURL, &out)
	require.NoError(t, err)
	defer b.close()
	d := mvccDrivers()[1]
	d.setup = []string{`CREATE TABLE public.mvcc_maintenance (at timestamptz NOT NULL)`}
	d.maintenance = `INSERT INTO public.mvcc_maintenance VALUES (now())`
	res, err := b.mvccRun(t.Context(), d, mvccHolds[2], 1, "")
	require.NoError(t, err, out.String())
	require.GreaterOrEqual(t, res.maintained, int64(1))
	require.Contains(t, out.String(), "maintenance calls")
	require.Len(t, res.rows, 1)
	require.Greater(t, res.completed, int64(0))
	// Every enqueue and every claim that locked a row took an xid since
	// the hold took its own.
	require.Greater(t, res.last().xminAge, int64(50), out.String())
}

func TestMVCCIntervals(t *testing.T) {
	for _, c := range []struct {
		mode, override time.Duration
		every          time.Duration
		n              int
	}{
		{3 * time.Minute, 0, 30 * time.Second, 6},
		{10 * time.Minute, 0, time.Minute, 10},
	} {
		require.Equal(t, c.every, mvccEvery(c.every, c.mode))
		require.Equal(t, c.n, mvccIntervals(c.mode, c.every))
	}
	// A short run is sampled at least four times.
	require.Equal(t, 5*time.Second, mvccEvery(30*time.Second, 20*time.Second))
	require.Equal(t, 4, mvccIntervals(20*time.Second, 5*time.Second))
	require.Equal(t, 1, mvccIntervals(time.Second, 5*time.Second), "a run has at least one interval")

	cfg := Config{Mode: "quick", MVCCOverride: 20 * time.Second}
	require.NoError(t, cfg.setDefaults())
	require.Equal(t, [2]time.Duration{20 * time.Second, 5 * time.Second}, [2]time.Duration{cfg.MVCC, cfg.MVCCEvery})
	cfg = Config{Mode: "full"}
	require.NoError(t, cfg.setDefaults())
	require.Equal(t, [2]time.Duration{10 * time.Minute, time.Minute}, [2]time.Duration{cfg.MVCC, cfg.MVCCEvery})
	require.ErrorContains(t, (&Config{Mode: "quick", MVCCOverride: -time.Second}).setDefaults(), "-mvcc-duration -1s")
}

// intervalRow: rates over the interval's real length, the backlog as
// enqueued minus claimed at its end, WAL per job completed in it.
func TestIntervalRow(t *testing.T) {
	start := time.Unix(1000, 0)
	prev := mvccCounts{at: start.Add(30 * time.Second), enqueued: 60_000, claimed: 59_000, completed: 58_990, wal: 1_000_000}
	cur := mvccCounts{at: start.Add(60 * time.Second), enqueued: 120_000, claimed: 100_000, completed: 88_990, wal: 31_000_000,
		live: 7, dead: 8, size: 9, xminAge: 10, p50: time.Millisecond, p99: 5 * time.Millisecond}
	require.Equal(t, mvccRow{end: time.Minute, done: 1000, enq: 2000, backlog: 20_000, p50: time.Millisecond, p99: 5 * time.Millisecond,
		walPerJob: 1000, live: 7, dead: 8, size: 9, xminAge: 10}, intervalRow(start, prev, cur))
	// Nothing completed: no WAL per job rather than a division by zero.
	require.Zero(t, intervalRow(start, cur, cur).walPerJob)
}

// paceBatches never runs ahead of the offer: batch k goes once (k+1) x
// batch jobs were offered; a late call is caught up at once.
func TestPaceBatches(t *testing.T) {
	require.Equal(t, 20*time.Millisecond, batchDue(0, 1000, 20))
	require.Equal(t, time.Second, batchDue(49, 1000, 20))

	stop := make(chan struct{})
	began := time.Now()
	sent := 0
	time.AfterFunc(time.Second, func() { close(stop) }) // fifty periods: several batches even on a busy machine
	k, err := paceBatches(t.Context(), 1000, 20, stop, func() error {
		sent++
		require.LessOrEqual(t, float64(sent*20), 1000*time.Since(began).Seconds(), "ahead of the offer")
		return nil
	})
	require.NoError(t, err)
	require.Equal(t, sent, k)
	require.Greater(t, k, 1, "several batches")

	// The first call takes 1.5 periods (a period of a second): the next
	// one is already due and goes without waiting a period. Half a period
	// is the bound, room for a busy machine's scheduling.
	stop = make(chan struct{})
	var returned, next time.Time
	calls := 0
	_, err = paceBatches(t.Context(), 10, 10, stop, func() error {
		calls++
		switch calls {
		case 1:
			time.Sleep(1500 * time.Millisecond)
			returned = time.Now()
		case 2:
			next = time.Now()
			close(stop)
		}
		return nil
	})
	require.NoError(t, err)
	require.Less(t, next.Sub(returned), 500*time.Millisecond, "caught up, not a period later")
}

func TestRawClaimSQL(t *testing.T) {
	s := rawClaimSQL(10)
	require.Contains(t, s, "LIMIT 10 FOR UPDATE SKIP LOCKED")
	require.NotContains(t, s, "LIMIT 100")
}

// TestMVCCWorkflows runs the held-snapshot section with dependencies and
// outputs in the mix (-mvcc-workflows): free and held, the pairs' children
// completed too (a child is claimable only once its parent completed, so a
// run that completes jobs has released children), and the targets under
// their own names.
func TestMVCCWorkflows(t *testing.T) {
	cfg := Config{Mode: "test", DatabaseURL: testdb.AdminURL(t), Only: "mvcc", MVCCWorkflows: true}
	require.NoError(t, cfg.setDefaults())
	var out bytes.Buffer
	require.NoError(t, run(t.Context(), cfg, &out))
	text := out.String()
	t.Log(text)
	require.Contains(t, text, "\n-- free, workflows: nothing held --")
	require.Contains(t, text, "\n-- held, workflows: "+mvccHolds[1].about+" --")
	require.NotContains(t, text, "held-reader")
	for _, name := range []string{"mvcc-workflows-held-vs-free", "mvcc-workflows-held-backlog-s", "mvcc-workflows-held-claim-p99-ratio"} {
		require.Regexp(t, `(?m)^target `+name+`: [0-9.]+ \(goal (>=|<=) [0-9.]+\) (met|MISS)$`, text)
	}
}

// TestChooseHolds: -mvcc-runs picks runs by name, free first whether named
// or not, in the section's order; an unknown name is refused, named.
func TestChooseHolds(t *testing.T) {
	all, err := chooseHolds(mvccHolds, "")
	require.NoError(t, err)
	require.Equal(t, mvccHolds, all)
	some, err := chooseHolds(mvccHolds, "held-cron, held-reader")
	require.NoError(t, err)
	var keys []string
	for _, h := range some {
		keys = append(keys, h.key)
	}
	require.Equal(t, []string{"free", "held-reader", "held-cron"}, keys)
	_, err = chooseHolds(mvccHolds, "held,helt")
	require.ErrorContains(t, err, `no run "helt"`)
}
