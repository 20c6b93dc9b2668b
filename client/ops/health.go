package ops

import (
	"context"
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
	err := c.db.QueryRow(ctx, "SELECT holder_kind, holder_pid, holder_name, holder_user, holder_state, holder_since, "+
		"holder_age, holder_xid_age, jobs_dead_tuples, jobs_live_tuples, jobs_last_vacuum, jobs_bytes, warning FROM "+call, values...).
		Scan(&kind, &h.HolderPID, &name, &user, &state, &h.HolderSince, &h.HolderAge, &h.HolderXIDAge,
			&dead, &live, &h.LastVacuum, &bytes, &warning)
	if err != nil {
		return Health{}, translate(op, err)
	}
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
