package torture

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// checkSlots: no schedule slot fired twice, by the row log (every job
// ever inserted, whoever fired it, acknowledged or not, later completed
// and pruned or not) and by the record (two acknowledged calls that say
// they fired one slot). In the final check, also: every slot of a
// catch-up-all schedule whose firers all use the database clock, from the
// first acknowledged fire_schedules call on that clock to the last, was
// fired. That is all fire_schedules promises whatever its catch-up rule:
// a 'latest' schedule passes slots over, and a caller on a skewed clock
// may fire a slot early or, behind, not yet.
func checkSlots(ctx context.Context, tx pgx.Tx, fires []fire, first, last time.Time, final bool) ([]string, error) {
	var v []string
	rows, err := tx.Query(ctx, `
SELECT schedule, slot, array_agg(DISTINCT job ORDER BY job)
FROM torture.row_log
WHERE op = 'I' AND schedule IS NOT NULL
GROUP BY schedule, slot HAVING count(DISTINCT job) > 1
ORDER BY schedule, slot`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var name string
		var slot time.Time
		var jobs []int64
		if err := rows.Scan(&name, &slot, &jobs); err != nil {
			rows.Close()
			return nil, err
		}
		v = append(v, fmt.Sprintf("schedule %s: slot %s fired %d times: jobs %v", name, slot.UTC().Format(time.RFC3339Nano), len(jobs), jobs))
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	type key struct {
		name string
		slot int64
	}
	seen := map[key]int64{}
	for _, f := range fires {
		k := key{f.schedule, f.slot.UnixMicro()}
		if j, ok := seen[k]; ok && j != f.job {
			v = append(v, fmt.Sprintf("schedule %s: slot %s acknowledged fired twice: jobs %d and %d",
				f.schedule, f.slot.UTC().Format(time.RFC3339Nano), j, f.job))
		}
		seen[k] = f.job
	}
	if !final || first.IsZero() {
		return v, nil
	}
	for _, s := range schedules {
		if s.queue != dbQueue || s.catchUp != "all" {
			continue
		}
		missing, err := missingSlots(ctx, tx, s.name, first, last)
		if err != nil {
			return nil, err
		}
		if len(missing) > 0 {
			v = append(v, fmt.Sprintf("schedule %s (catch_up all, database clock): %d slots between %s and %s never fired, the first %s",
				s.name, len(missing), first.UTC().Format(time.RFC3339Nano), last.UTC().Format(time.RFC3339Nano),
				missing[0].UTC().Format(time.RFC3339Nano)))
		}
	}
	return v, nil
}

// missingSlots lists the slots of the schedule in [first, last] of which
// no job was ever inserted. The slots are its fired ones' grid: the
// earliest fired slot plus whole steps, the step being the smallest gap
// between two fired slots (a second, a minute).
func missingSlots(ctx context.Context, tx pgx.Tx, name string, first, last time.Time) ([]time.Time, error) {
	rows, err := tx.Query(ctx, `SELECT DISTINCT slot FROM torture.row_log WHERE op = 'I' AND schedule = $1 ORDER BY slot`, name)
	if err != nil {
		return nil, err
	}
	slots, err := pgx.CollectRows(rows, pgx.RowTo[time.Time])
	if err != nil || len(slots) < 2 {
		return nil, err
	}
	fired := map[int64]bool{}
	step := time.Duration(1<<63 - 1)
	for i, s := range slots {
		fired[s.UnixMicro()] = true
		if i > 0 {
			step = min(step, s.Sub(slots[i-1]))
		}
	}
	var missing []time.Time
	at := slots[0]
	if first.After(at) {
		at = at.Add((first.Sub(at) + step - 1) / step * step)
	}
	for ; !at.After(last); at = at.Add(step) {
		if !fired[at.UnixMicro()] {
			missing = append(missing, at)
		}
	}
	return missing, nil
}
