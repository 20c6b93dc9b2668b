package lifecycle_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// slotsBetween lists a stored schedule's slots after from and at or before
// to, from backoff.schedule_fires (the code fire_schedules advances with).
func slotsBetween(t testing.TB, q querier, name string, from, to time.Time) []time.Time {
	t.Helper()
	var out []time.Time
	for after := from; ; {
		rows, err := q.Query(context.Background(), "SELECT fire_at FROM backoff.schedule_fires($1, $2, 1000)", name, after)
		require.NoError(t, err)
		n := 0
		for rows.Next() {
			var at time.Time
			require.NoError(t, rows.Scan(&at))
			n++
			after = at
			if at.After(to) {
				break
			}
			out = append(out, at.UTC())
		}
		rows.Close()
		require.NoError(t, rows.Err())
		if n < 1000 || after.After(to) {
			return out
		}
	}
}

// TestFireSchedulesSkewedClocks: four firers on their own connections call
// backoff.fire_schedules concurrently through two simulated days, each on its
// own clock: 0, 3, 6 and 9 minutes behind a shared minute-by-minute time
// (max_clock_skew set to 10 minutes), each calling at a random fifth of the
// minutes and one of them at every minute; the firers go through a minute
// together and their calls in it overlap in any order. Of
// every schedule (cron every 5 minutes, a 7-minute interval, each with
// catch_up 'latest' and 'all', and two New York schedules across the
// spring-forward night) every slot whose interval held some call's clock
// fires exactly once; 'all' fires every slot; no slot fires twice; and the
// slots 'latest' passed over are counted in missed (fired + missed = the
// slots of the two days).
func TestFireSchedulesSkewedClocks(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.NewURL(t)
	db := poolOn(t, url)
	start := utc("2026-03-07 00:00") // New York springs forward on 2026-03-08
	const rounds = 2*24*60 + 5
	end := start.Add(rounds * time.Minute)
	schedules := map[string]string{
		"cron5-latest":  "p_cron => '*/5 * * * *'",
		"cron5-all":     "p_cron => '*/5 * * * *', p_catch_up => 'all'",
		"every7-latest": "p_every => '7 minutes'",
		"every7-all":    "p_every => '7 minutes', p_catch_up => 'all'",
		"ny-fixed":      "p_cron => '30 2 * * *', p_time_zone => 'America/New_York'",
		"ny-wildcard":   "p_cron => '*/20 1-3 * * *', p_time_zone => 'America/New_York'",
	}
	exec(t, db, "UPDATE backoff.settings SET max_clock_skew = '10 minutes'")
	require.Equal(t, 1, scalar[int](t, db, "SELECT count(*) FROM backoff.settings WHERE max_clock_skew = '10 minutes'"))
	for name, timing := range schedules {
		putSchedule(t, db, name, "skew", timing, "", start)
	}

	const firers = 4
	behind := [firers]time.Duration{0, 3 * time.Minute, 6 * time.Minute, 9 * time.Minute}
	// forced[r]: the firer that calls at minute r whatever its coin says.
	forced := make([]int, rounds)
	r0 := rand.New(rand.NewPCG(76, 1))
	for r := range forced {
		forced[r] = r0.IntN(firers)
	}
	var (
		mu    sync.Mutex
		cond  = sync.NewCond(&mu)
		done  [firers]int // rounds each firer has finished
		calls [firers][]time.Time
		errs  []error
	)
	slowest := func() int {
		m := done[0]
		for _, d := range done[1:] {
			m = min(m, d)
		}
		return m
	}
	var wg sync.WaitGroup
	for f := range firers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			finish := func(err error) {
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				}
				done[f] = rounds + 1 // nobody waits for a firer that stopped
				cond.Broadcast()
				mu.Unlock()
			}
			conn := connOn(t, url)
			coin := rand.New(rand.NewPCG(uint64(f), 76))
			for r := range rounds {
				mu.Lock()
				for slowest() < r && len(errs) == 0 {
					cond.Wait()
				}
				stop := len(errs) > 0
				mu.Unlock()
				if stop {
					finish(nil)
					return
				}
				if forced[r] == f || coin.IntN(5) == 0 {
					now := start.Add(time.Duration(r+1)*time.Minute - behind[f])
					rows, err := conn.Query(ctx, "SELECT schedule FROM backoff.fire_schedules(1000, $1)", now)
					if err == nil {
						rows.Close()
						err = rows.Err()
					}
					if err != nil {
						finish(fmt.Errorf("firer %d at %s: %w", f, now, err))
						return
					}
					calls[f] = append(calls[f], now)
				}
				mu.Lock()
				done[f] = r + 1
				cond.Broadcast()
				mu.Unlock()
			}
			finish(nil)
		}()
	}
	wg.Wait()
	require.Empty(t, errs)
	// A last call at the end fires what is due then (with 'all', every slot).
	fire(t, db, 1000, end)

	var clocks []time.Time
	for f := range firers {
		t.Logf("firer %d (%s behind): %d calls", f, behind[f], len(calls[f]))
		clocks = append(clocks, calls[f]...)
	}
	clocks = append(clocks, end)
	names := make([]string, 0, len(schedules))
	for name := range schedules {
		names = append(names, name)
	}
	sort.Strings(names)
	slots := map[string][]time.Time{}
	fired := map[string][]time.Time{}
	for _, name := range names {
		all := slotsBetween(t, db, name, start, end)
		slots[name] = all
		fired[name] = slotsOf(t, db, name)
		firedSet := map[time.Time]bool{}
		for _, s := range fired[name] {
			require.False(t, firedSet[s], "%s: slot %s fired twice", name, s)
			firedSet[s] = true
		}
		allSet := map[time.Time]bool{}
		for _, s := range all {
			allSet[s] = true
		}
		for _, s := range fired[name] {
			require.True(t, allSet[s], "%s: %s is not a slot of the run", name, s)
		}
		// Covered: some call's clock lay in the slot's interval.
		var lost []time.Time
		covered := 0
		for i, s := range all {
			next := end.Add(time.Nanosecond)
			if i+1 < len(all) {
				next = all[i+1]
			}
			for _, c := range clocks {
				if !c.Before(s) && c.Before(next) {
					covered++
					if !firedSet[s] {
						lost = append(lost, s)
					}
					break
				}
			}
		}
		t.Logf("%s: %d slots, %d covered by a call, %d fired", name, len(all), covered, len(fired[name]))
		assert.Empty(t, lost, "%s: %d slots covered by a call were never fired (first: %v)", name, len(lost), firstOf(lost))
	}
	if t.Failed() {
		return
	}
	for _, name := range names {
		var nFired, missed int64
		require.NoError(t, db.QueryRow(ctx, "SELECT fired, missed FROM backoff.schedules WHERE name = $1", name).Scan(&nFired, &missed))
		require.Equal(t, int64(len(fired[name])), nFired, name)
		require.Equal(t, int64(len(slots[name])), nFired+missed, "%s: fired + missed", name)
		if strings.HasSuffix(name, "-all") {
			require.Equal(t, slots[name], fired[name], "%s: 'all' fires every slot", name)
		}
	}
}

func firstOf(ts []time.Time) any {
	if len(ts) == 0 {
		return nil
	}
	return ts[0]
}
