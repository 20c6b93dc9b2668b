package cli

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/cmd/backoffctl/internal/config"
)

// Schedules in `config diff` and `config apply` (docs/schedules.md): the
// file's [schedules.NAME] against backoff.schedules, written through
// backoff.put_schedule, pause_schedule, resume_schedule and drop_schedule.
// Behind a router a schedule lives on its queue's shard only (docs/adr/0063):
// each shard is compared with the schedules of its own queues.

// readSchedules reads backoff.schedules (schema version 5 on) into
// st.Schedules and st.SchedulePaused.
func readSchedules(ctx context.Context, q client.DB, st *dbState) error {
	st.Schedules, st.SchedulePaused = map[string]config.Schedule{}, map[string]bool{}
	// A database before schema version 5 has no schedules (and a failed
	// statement would abort apply's transaction: ask first).
	var exists bool
	if err := q.QueryRow(ctx, `SELECT pg_catalog.to_regclass('backoff.schedules') IS NOT NULL`).Scan(&exists); err != nil {
		return fmt.Errorf("read schedules: %w", err)
	}
	if !exists {
		return nil
	}
	rows, err := q.Query(ctx, `
SELECT s.name, s.queue, s.payload::text, coalesce(s.cron, ''),
       coalesce((extract(epoch FROM s.every) * 1000000)::bigint, 0), s.time_zone, coalesce(s.policy, ''),
       s.priority, coalesce(s.max_attempts, 0), s.catch_up,
       coalesce((extract(epoch FROM s.catch_up_window) * 1000000)::bigint, 0), s.catch_up_limit,
       s.skip_if_running, s.paused
FROM backoff.schedules AS s`)
	if err != nil {
		return fmt.Errorf("read schedules: %w", err)
	}
	for rows.Next() {
		var s config.Schedule
		var every, window int64
		var paused bool
		if err := rows.Scan(&s.Name, &s.Queue, &s.Payload, &s.Cron, &every, &s.TimeZone, &s.Policy, &s.Priority,
			&s.MaxAttempts, &s.CatchUp, &window, &s.CatchUpLimit, &s.SkipIfRunning, &paused); err != nil {
			rows.Close()
			return fmt.Errorf("read schedules: %w", err)
		}
		s.Every, s.CatchUpWindow = time.Duration(every)*time.Microsecond, time.Duration(window)*time.Microsecond
		if p, ok := config.CanonicalJSON([]byte(s.Payload)); ok {
			s.Payload = p
		}
		st.Schedules[s.Name] = s
		st.SchedulePaused[s.Name] = paused
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read schedules: %w", err)
	}
	return nil
}

// scheduleFields renders a schedule as (TOML key, value) pairs, "-" for
// what is off. enabled is compared only when the file sets it.
func scheduleFields(s config.Schedule, paused bool) [][2]string {
	timing := [2]string{"cron", s.Cron}
	if s.Cron == "" {
		timing = [2]string{"every", config.FormatDuration(s.Every)}
	}
	or := func(v, off string) string {
		if v == "" {
			return off
		}
		return v
	}
	limit := "-"
	if s.CatchUp == "all" {
		limit = strconv.Itoa(s.CatchUpLimit)
	}
	return [][2]string{
		{"queue", s.Queue},
		timing,
		{"time_zone", s.TimeZone},
		{"payload", s.Payload},
		{"policy", or(s.Policy, "- (the queue's)")},
		{"priority", strconv.Itoa(s.Priority)},
		{"max_attempts", optInt(s.MaxAttempts)},
		{"catch_up", s.CatchUp},
		{"catch_up_window", optDuration(s.CatchUpWindow)},
		{"catch_up_limit", limit},
		{"skip_if_running", strconv.FormatBool(s.SkipIfRunning)},
		{"enabled", strconv.FormatBool(!paused)},
	}
}

// ownsSchedule reports whether st's database holds s: always, unless st
// is one shard of several and s's queue lives on another.
func ownsSchedule(st *dbState, queue string) bool {
	if st.shards <= 1 || st.layout == nil {
		return true
	}
	k, _ := st.layout.QueueShard(queue)
	return k == st.shard
}

// planSchedules compares the file's schedules with the database's.
func planSchedules(c *config.Config, st *dbState) []change {
	var out []change
	want := map[string]bool{}
	for _, s := range c.Schedules {
		if !ownsSchedule(st, s.Queue) {
			continue
		}
		want[s.Name] = true
		enabled := s.Enabled == nil || *s.Enabled
		newF := scheduleFields(s, !enabled)
		cur, ok := st.Schedules[s.Name]
		if !ok {
			ch := change{Kind: changeAdd, Object: "schedule", Name: s.Name, schedule: s, at: st.now}
			for _, f := range newF {
				if !strings.HasPrefix(f[1], "-") && f[1] != "none" && (f[0] != "enabled" || s.Enabled != nil) {
					ch.Fields = append(ch.Fields, fieldChange{Field: f[0], New: f[1]})
				}
			}
			out = append(out, ch)
			continue
		}
		oldF := scheduleFields(cur, st.SchedulePaused[s.Name])
		ch := change{Kind: changeUpdate, Object: "schedule", Name: s.Name, schedule: s, Paused: st.SchedulePaused[s.Name], at: st.now}
		if cur.Queue != s.Queue {
			ch.Note = "another queue: dropped and put again"
		}
		// A timing given once as cron and now as every shows as two fields.
		oldTiming, newTiming := oldF[1], newF[1]
		if oldTiming[0] != newTiming[0] {
			ch.Fields = append(ch.Fields, fieldChange{Field: oldTiming[0], Old: oldTiming[1], New: "-"},
				fieldChange{Field: newTiming[0], Old: "-", New: newTiming[1]})
		}
		for i := range newF {
			if i == 1 && oldTiming[0] != newTiming[0] {
				continue
			}
			if newF[i][0] == "enabled" && s.Enabled == nil {
				continue // the pause is the operator's
			}
			if oldF[i][1] != newF[i][1] {
				ch.Fields = append(ch.Fields, fieldChange{Field: newF[i][0], Old: oldF[i][1], New: newF[i][1]})
			}
		}
		if len(ch.Fields) > 0 {
			out = append(out, ch)
		}
	}
	for _, name := range sortedNames(st.Schedules) {
		if !want[name] {
			// Unlike a queue's row, dropping a paused schedule un-pauses
			// nothing: apply --prune drops it.
			out = append(out, change{Kind: changeExtra, Object: "schedule", Name: name, Note: "only in the database"})
		}
	}
	return out
}

// applySchedules writes the schedule changes inside tx: put_schedule for
// an added or changed one (its counters and next fire time stay unless its
// timing changed), a drop first when its queue changed, the pause the file
// asks for; with prune, drop_schedule for those only in the database.
func applySchedules(ctx context.Context, tx pgx.Tx, changes []change, prune bool) error {
	for _, ch := range changes {
		if ch.Object != "schedule" {
			continue
		}
		s := ch.schedule
		switch ch.Kind {
		case changeExtra:
			if prune {
				if _, err := tx.Exec(ctx, `SELECT backoff.drop_schedule($1)`, ch.Name); err != nil {
					return fmt.Errorf("drop schedule %q: %w", ch.Name, err)
				}
			}
			continue
		case changeUpdate:
			if ch.Note != "" {
				if _, err := tx.Exec(ctx, `SELECT backoff.drop_schedule($1)`, ch.Name); err != nil {
					return fmt.Errorf("drop schedule %q: %w", ch.Name, err)
				}
			}
		}
		var cron, every, policy, maxAttempts, window any
		if s.Cron != "" {
			cron = s.Cron
		} else {
			every = s.Every
		}
		if s.Policy != "" {
			policy = s.Policy
		}
		if s.MaxAttempts > 0 {
			maxAttempts = s.MaxAttempts
		}
		if s.CatchUpWindow > 0 {
			window = s.CatchUpWindow
		}
		_, err := tx.Exec(ctx, `SELECT FROM backoff.put_schedule($1, $2, p_cron => $3::text, p_every => $4::interval,
	p_time_zone => $5, p_payload => $6::jsonb, p_policy => $7::text, p_priority => $8, p_max_attempts => $9::integer,
	p_catch_up => $10, p_catch_up_window => $11::interval, p_catch_up_limit => $12, p_skip_if_running => $13,
	p_now => coalesce($14::timestamptz, now()))`,
			s.Name, s.Queue, cron, every, s.TimeZone, s.Payload, policy, s.Priority, maxAttempts, s.CatchUp, window,
			s.CatchUpLimit, s.SkipIfRunning, ch.at)
		if err != nil {
			return fmt.Errorf("put schedule %q: %w", s.Name, err)
		}
		if s.Enabled != nil {
			fn := "backoff.resume_schedule"
			if !*s.Enabled {
				fn = "backoff.pause_schedule"
			}
			if _, err := tx.Exec(ctx, `SELECT `+fn+`($1, coalesce($2::timestamptz, now()))`, s.Name, ch.at); err != nil {
				return fmt.Errorf("switch schedule %q: %w", s.Name, err)
			}
		}
	}
	return nil
}
