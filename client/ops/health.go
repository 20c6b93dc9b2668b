package ops

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
)

// Health is the row of backoff.health: the oldest holder of the database's
// xmin horizon and what the job table looks like under it. While a
// snapshot is held (a session idle in a transaction, a long report, a
// replication slot), vacuum can remove no job version that finished after
// it.
type Health struct {
	// HolderKind is "session", "replication slot" or "prepared transaction";
	// empty when nothing holds the horizon.
	HolderKind  string
	HolderPID   *int32
	HolderName  string // the session's application_name, the slot's name or the prepared gid
	HolderUser  string
	HolderState string
	// HolderSince is when the holder's transaction started (nil for a slot).
	HolderSince *time.Time
	HolderAge   *time.Duration
	// HolderXIDAge is the holder's horizon in transactions behind the
	// database's.
	HolderXIDAge *int32
	// DeadTuples, LiveTuples, LastVacuum and Bytes describe backoff.jobs
	// (pg_stat_user_tables; Bytes with indexes).
	DeadTuples, LiveTuples int64
	LastVacuum             *time.Time
	Bytes                  int64
	// Warning says what is wrong, or is empty.
	Warning string
	// Liveness is whether the maintenance runs and workers are there
	// (backoff.liveness, as health returns it).
	Liveness Liveness
	// Segments counts the live segments of backoff.jobs: 3, more while
	// rotate has added some because a transaction that read the table held
	// the others (docs/adr/0082).
	Segments int32
	// SegmentsWaiting counts the segments not current that still take
	// space, SegmentsWaitingBytes (with indexes): one just switched from
	// until the next rotate, more while SegmentsHeldBy (the sessions that
	// hold a lock on them, "pid N ('name')"; empty: none) keep them.
	SegmentsWaiting      int32
	SegmentsWaitingBytes int64
	SegmentsHeldBy       string
}

// Liveness is the row of backoff.liveness: when the maintenance calls
// last ran and how many workers were seen in the last minute
// (docs/adr/0079). Nothing else tells a stopped queue from an idle one.
type Liveness struct {
	// ReapAt, RotateAt and FireAt are when backoff.reap, backoff.rotate
	// and backoff.fire_schedules last ran, to within 15 seconds; nil:
	// never.
	ReapAt, RotateAt, FireAt *time.Time
	// SwitchAt is when the current segment became current (rotate's last
	// switch, or the install); TruncateAt when rotate last truncated a
	// segment (nil: never).
	SwitchAt, TruncateAt *time.Time
	// ActiveSchedules counts the schedules not paused: with none, a firer
	// that never ran is no fault.
	ActiveSchedules int64
	// WorkersSeen counts the workers seen in the minute up to now: those
	// that named themselves to rotate (every Worker, busy or idle) and
	// those that claimed a job that is still running.
	WorkersSeen int64
	// Warning says what stopped (maintenance not run within the quiet
	// limit, no worker seen), or is empty.
	Warning string
}

// DefaultLivenessMaxQuiet is how long a maintenance call may go unrun
// before Liveness warns, as backoff.liveness's default.
const DefaultLivenessMaxQuiet = 10 * time.Minute

// Liveness reads backoff.liveness: a maintenance call not run within
// maxQuiet (0: DefaultLivenessMaxQuiet) is a warning, and so is a minute
// without any worker seen. Through a router, with one row per shard, the
// earliest time of the shards (never, when one never ran), the fewest
// workers and every shard's warning. Admin only.
func (c *Client) Liveness(ctx context.Context, maxQuiet time.Duration) (Liveness, error) {
	op := "read liveness"
	if maxQuiet <= 0 {
		maxQuiet = DefaultLivenessMaxQuiet
	}
	call, values := c.fn("liveness", sqlapi.Arg("p_max_quiet", "interval", maxQuiet))
	rows, err := c.db.Query(ctx, "SELECT reap_at, rotate_at, switch_at, truncate_at, fire_at, active_schedules, "+
		"workers_seen, warning FROM "+call, values...)
	if err != nil {
		return Liveness{}, translate(op, err)
	}
	defer rows.Close()
	var out Liveness
	var warnings []string
	first := true
	for rows.Next() {
		var l Liveness
		var warning *string
		if err := rows.Scan(&l.ReapAt, &l.RotateAt, &l.SwitchAt, &l.TruncateAt, &l.FireAt, &l.ActiveSchedules,
			&l.WorkersSeen, &warning); err != nil {
			return Liveness{}, translate(op, err)
		}
		if w := sqlapi.Deref(warning); w != "" && !slices.Contains(warnings, w) {
			warnings = append(warnings, w)
		}
		if first {
			out, first = l, false
			continue
		}
		out.ReapAt, out.RotateAt, out.FireAt = earliest(out.ReapAt, l.ReapAt), earliest(out.RotateAt, l.RotateAt), earliest(out.FireAt, l.FireAt)
		out.SwitchAt, out.TruncateAt = earliest(out.SwitchAt, l.SwitchAt), earliest(out.TruncateAt, l.TruncateAt)
		out.ActiveSchedules += l.ActiveSchedules
		out.WorkersSeen = min(out.WorkersSeen, l.WorkersSeen)
	}
	if err := rows.Err(); err != nil {
		return Liveness{}, translate(op, err)
	}
	out.Warning = strings.Join(warnings, "; ")
	return out, nil
}

// earliest is the earlier of two times, nil (never) before any.
func earliest(a, b *time.Time) *time.Time {
	if a == nil || b == nil {
		return nil
	}
	if b.Before(*a) {
		return b
	}
	return a
}

// DefaultHealthMaxAge is how long a snapshot may be held before Health
// warns, as backoff.health's default.
const DefaultHealthMaxAge = 5 * time.Minute

// Health reads backoff.health: a holder older than maxAge (0:
// DefaultHealthMaxAge) is a warning. Admin only.
func (c *Client) Health(ctx context.Context, maxAge time.Duration) (Health, error) {
	op := "read vacuum health"
	if maxAge <= 0 {
		maxAge = DefaultHealthMaxAge
	}
	call, values := c.fn("health", sqlapi.Arg("p_max_age", "interval", maxAge))
	var h Health
	var kind, name, user, state, warning *string
	var dead, live, bytes *int64
	var liveWarning, heldBy *string
	l := &h.Liveness
	err := c.db.QueryRow(ctx, "SELECT holder_kind, holder_pid, holder_name, holder_user, holder_state, holder_since, "+
		"holder_age, holder_xid_age, jobs_dead_tuples, jobs_live_tuples, jobs_last_vacuum, jobs_bytes, warning, "+
		"reap_at, rotate_at, switch_at, truncate_at, fire_at, active_schedules, workers_seen, liveness_warning, "+
		"segments, segments_waiting, segments_waiting_bytes, segments_held_by FROM "+call, values...).
		Scan(&kind, &h.HolderPID, &name, &user, &state, &h.HolderSince, &h.HolderAge, &h.HolderXIDAge,
			&dead, &live, &h.LastVacuum, &bytes, &warning,
			&l.ReapAt, &l.RotateAt, &l.SwitchAt, &l.TruncateAt, &l.FireAt, &l.ActiveSchedules, &l.WorkersSeen, &liveWarning,
			&h.Segments, &h.SegmentsWaiting, &h.SegmentsWaitingBytes, &heldBy)
	if err != nil {
		return Health{}, translate(op, err)
	}
	l.Warning = sqlapi.Deref(liveWarning)
	h.SegmentsHeldBy = sqlapi.Deref(heldBy)
	h.HolderKind, h.HolderName, h.HolderUser, h.HolderState, h.Warning =
		sqlapi.Deref(kind), sqlapi.Deref(name), sqlapi.Deref(user), sqlapi.Deref(state), sqlapi.Deref(warning)
	h.DeadTuples, h.LiveTuples, h.Bytes = derefInt(dead), derefInt(live), derefInt(bytes)
	return h, nil
}

func derefInt(v *int64) int64 {
	if v == nil {
		return 0
	}
	return *v
}
