package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
)

func init() { register(newCronCommand) }

// cronJobName is the pg_cron job of a database: one per database and
// purpose, so that several databases on one server each reap their own
// jobs, and fire their own schedules (--schedules) on a job of its own.
func cronJobName(database string, schedules bool) string {
	if schedules {
		return "backoff-fire-schedules:" + database
	}
	return "backoff-reap:" + database
}

func newCronCommand() *cobra.Command {
	cmd := groupCommand(&cobra.Command{
		Use:   "cron",
		Short: "Reap expired leases inside PostgreSQL with pg_cron",
		Long: `Schedule backoff.reap() with pg_cron, so that jobs of crashed workers are
retried or dead-lettered even when no worker runs its reaper. Optional: the
workers reap by themselves; this is for deployments where workers come and
go, or that want the reaper beside the data.

pg_cron must be installed on the server (Debian: postgresql-15-cron) and
loaded at start (shared_preload_libraries = 'pg_cron', then a restart).
pg_cron lives in one database, cron.database_name (default postgres): install
connects there as the same user, creates the extension if it is missing
(which needs a superuser) and schedules the job with
cron.schedule_in_database, to run in the database of --database-url. The
job is named backoff-reap:DATABASE; installing again updates it.`,
		Example: `  backoffctl cron install
  backoffctl cron install --schedule '*/5 * * * *' --limit 5000
  backoffctl cron install --schedule '10 seconds'
  backoffctl cron status
  backoffctl cron uninstall`,
	})
	cmd.AddCommand(newCronInstallCommand(), newCronUninstallCommand(), newCronStatusCommand())
	return cmd
}

// cronTarget is the database to reap and the connection to pg_cron's
// database.
type cronTarget struct {
	database, user string
	cronDB         string
	cron           *pgx.Conn // to cron.database_name
	app            *pgx.Conn // to the database of --database-url
	name           string    // our job's name (cronJobName)
}

func (t *cronTarget) close(ctx context.Context) {
	if t.cron != nil && t.cron != t.app {
		t.cron.Close(ctx)
	}
	if t.app != nil {
		t.app.Close(ctx)
	}
}

// openCron connects to the application database and to pg_cron's, after
// checking that pg_cron is installed and loaded.
func openCron(ctx context.Context, cmd *cobra.Command, createExtension bool) (*cronTarget, error) {
	schedules, _ := cmd.Flags().GetBool("schedules")
	cfg, err := connConfig(cmd)
	if err != nil {
		return nil, err
	}
	app, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to %s:%d: %w", cfg.Host, cfg.Port, rootCause(err))
	}
	t := &cronTarget{app: app}
	var available bool
	var preload string
	var cronDB *string
	err = app.QueryRow(ctx, `
SELECT current_database(), current_user,
       EXISTS (SELECT FROM pg_available_extensions WHERE name = 'pg_cron'),
       current_setting('shared_preload_libraries'),
       current_setting('cron.database_name', true)`).Scan(&t.database, &t.user, &available, &preload, &cronDB)
	if err != nil {
		t.close(ctx)
		return nil, fmt.Errorf("check pg_cron: %w", err)
	}
	if !available {
		t.close(ctx)
		return nil, fmt.Errorf("pg_cron is not installed on this server: install it (Debian: apt-get install postgresql-15-cron), add it to shared_preload_libraries and restart PostgreSQL")
	}
	if !slices.Contains(strings.Split(strings.ReplaceAll(preload, " ", ""), ","), "pg_cron") {
		t.close(ctx)
		return nil, fmt.Errorf("pg_cron is installed but not loaded: add it to shared_preload_libraries (now %q) and restart PostgreSQL", preload)
	}
	t.name = cronJobName(t.database, schedules)
	t.cronDB = "postgres"
	if cronDB != nil && *cronDB != "" {
		t.cronDB = *cronDB
	}
	if t.cronDB == t.database {
		t.cron = app
	} else {
		ccfg := cfg.Copy()
		ccfg.Database = t.cronDB
		t.cron, err = pgx.ConnectConfig(ctx, ccfg)
		if err != nil {
			t.close(ctx)
			return nil, fmt.Errorf("connect to pg_cron's database %q (cron.database_name): %w", t.cronDB, rootCause(err))
		}
	}
	if createExtension {
		if _, err := t.cron.Exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_cron`); err != nil {
			t.close(ctx)
			return nil, fmt.Errorf("create extension pg_cron in database %q: %w", t.cronDB, err)
		}
	} else {
		var exists bool
		if err := t.cron.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'pg_cron')`).Scan(&exists); err != nil {
			t.close(ctx)
			return nil, fmt.Errorf("check pg_cron: %w", err)
		}
		if !exists {
			t.close(ctx)
			return nil, errNoCronExtension{t.cronDB}
		}
	}
	return t, nil
}

// errNoCronExtension: pg_cron is loaded but its extension was never
// created, so there is no job to show or remove.
type errNoCronExtension struct{ db string }

func (e errNoCronExtension) Error() string {
	return fmt.Sprintf("the pg_cron extension is not created in database %q: nothing is scheduled", e.db)
}

// cronJob is our row of cron.job.
type cronJob struct {
	ID       int64
	Schedule string
	Command  string
	Database string
	User     string
	Active   bool
}

func (t *cronTarget) job(ctx context.Context) (*cronJob, error) {
	var j cronJob
	err := t.cron.QueryRow(ctx, `SELECT jobid, schedule, command, database, username, active
		FROM cron.job WHERE jobname = $1 ORDER BY jobid LIMIT 1`, t.name).
		Scan(&j.ID, &j.Schedule, &j.Command, &j.Database, &j.User, &j.Active)
	if err == pgx.ErrNoRows {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read pg_cron job %s: %w", t.name, err)
	}
	return &j, nil
}

func newCronInstallCommand() *cobra.Command {
	var schedule string
	var limit int
	var schedules bool
	cmd := &cobra.Command{
		Use:   "install",
		Short: "Schedule the maintenance (reap and rotate) in this database with pg_cron",
		Long: `Schedule CALL backoff.maintain(p_limit => N) with pg_cron, to run in the
database of --database-url on --schedule (cron syntax, or pg_cron's
'N seconds'). Each run reaps expired leases and rotates the live jobs'
segments every second for 55 seconds, each round at READ COMMITTED, so a
job every minute keeps the cadence a Worker keeps (docs/adr/0081): a held
snapshot does not slow the queue. (A schema before version 5 gets
SELECT backoff.reap(p_limit => N) instead.) Installing again with other
settings updates the job; with the same settings it prints "no change".

With --schedules, the job fires the periodic jobs instead
(SELECT count(*) FROM backoff.fire_schedules(p_limit => N), docs/schedules.md),
named backoff-fire-schedules:DATABASE, beside the reaper's: for deployments
whose workers run with ScheduleInterval negative, or in a language without a
schedule loop. Every minute fires each slot within a minute of its time.`,
		Example: `  backoffctl cron install
  backoffctl cron install --schedule '*/5 * * * *'
  backoffctl cron install --schedules`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := wantJSON(cmd); err != nil {
				return err
			}
			if limit < 1 || (schedules && limit > 100000) {
				return usagef("--limit %d: want at least 1%s", limit, map[bool]string{true: " and at most 100000"}[schedules])
			}
			if strings.TrimSpace(schedule) == "" {
				return usagef("--schedule must not be empty")
			}
			ctx := cmd.Context()
			t, err := openCron(ctx, cmd, true)
			if err != nil {
				return err
			}
			defer t.close(ctx)
			fn, sig := "backoff.reap", "backoff.reap(timestamptz, integer)"
			command := "SELECT backoff.reap(p_limit => " + strconv.Itoa(limit) + ")"
			if schedules {
				fn, sig = "backoff.fire_schedules", "backoff.fire_schedules(integer, timestamptz)"
				command = "SELECT count(*) FROM backoff.fire_schedules(p_limit => " + strconv.Itoa(limit) + ")"
			}
			var migrated bool
			if err := t.app.QueryRow(ctx, `SELECT to_regprocedure($1) IS NOT NULL`, sig).Scan(&migrated); err != nil {
				return fmt.Errorf("check %s: %w", fn, err)
			}
			if !migrated {
				return fmt.Errorf("database %q has no %s: run `backoffctl migrate up` first", t.database, fn)
			}
			// Where the schema has backoff.maintain (version 5 and later),
			// the job calls it: reap and rotate every second for 55 s of
			// each minute, each round at READ COMMITTED (docs/adr/0081).
			if !schedules {
				var maintains bool
				if err := t.app.QueryRow(ctx, `SELECT to_regprocedure('backoff.maintain(integer, interval, interval, boolean)') IS NOT NULL`).Scan(&maintains); err != nil {
					return fmt.Errorf("check backoff.maintain: %w", err)
				}
				if maintains {
					command = "CALL backoff.maintain(p_limit => " + strconv.Itoa(limit) + ")"
				}
			}
			cur, err := t.job(ctx)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			name := t.name
			switch {
			case cur != nil && cur.Schedule == schedule && cur.Command == command && cur.Database == t.database && cur.Active:
				fmt.Fprintf(w, "no change: pg_cron job %d (%s) already runs %q on %q\n", cur.ID, name, command, schedule)
				return nil
			case cur != nil:
				_, err = t.cron.Exec(ctx, `SELECT cron.alter_job($1, $2, $3, $4, $5, true)`, cur.ID, schedule, command, t.database, t.user)
				if err != nil {
					return fmt.Errorf("update pg_cron job %s: %w", name, err)
				}
				fmt.Fprintf(w, "updated pg_cron job %d (%s): %q on %q in database %s\n", cur.ID, name, command, schedule, t.database)
			default:
				var id int64
				err = t.cron.QueryRow(ctx, `SELECT cron.schedule_in_database($1, $2, $3, $4, $5, true)`,
					name, schedule, command, t.database, t.user).Scan(&id)
				if err != nil {
					return fmt.Errorf("schedule pg_cron job %s: %w", name, err)
				}
				fmt.Fprintf(w, "scheduled pg_cron job %d (%s): %q on %q in database %s\n", id, name, command, schedule, t.database)
			}
			if t.cronDB != t.database {
				fmt.Fprintf(w, "(pg_cron keeps its jobs in database %s; `backoffctl cron status` shows the runs)\n", t.cronDB)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&schedule, "schedule", "* * * * *", "when to reap: cron syntax, or '1-59 seconds'")
	cmd.Flags().IntVar(&limit, "limit", 1000, "at most this many jobs per run")
	cmd.Flags().BoolVar(&schedules, "schedules", false, "the job that fires periodic jobs (backoff.fire_schedules), not the reaper")
	return cmd
}

func newCronUninstallCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "uninstall",
		Short: "Remove the pg_cron job that reaps this database",
		Long: `Unschedule the pg_cron job backoff-reap:DATABASE (with --schedules:
backoff-fire-schedules:DATABASE). The pg_cron extension
itself stays: other jobs may use it. Without such a job it prints
"no change".`,
		Example: `  backoffctl cron uninstall --database-url postgres://postgres@db/app`,
		Args:    exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := wantJSON(cmd); err != nil {
				return err
			}
			ctx := cmd.Context()
			w := cmd.OutOrStdout()
			t, err := openCron(ctx, cmd, false)
			if _, ok := err.(errNoCronExtension); ok {
				fmt.Fprintf(w, "no change: %v\n", err)
				return nil
			}
			if err != nil {
				return err
			}
			defer t.close(ctx)
			cur, err := t.job(ctx)
			if err != nil {
				return err
			}
			if cur == nil {
				fmt.Fprintf(w, "no change: no pg_cron job %s\n", t.name)
				return nil
			}
			if _, err := t.cron.Exec(ctx, `SELECT cron.unschedule($1::bigint)`, cur.ID); err != nil {
				return fmt.Errorf("unschedule pg_cron job %d: %w", cur.ID, err)
			}
			fmt.Fprintf(w, "unscheduled pg_cron job %d (%s)\n", cur.ID, t.name)
			return nil
		},
	}
	cmd.Flags().Bool("schedules", false, "the job that fires periodic jobs, not the reaper")
	return cmd
}

func newCronStatusCommand() *cobra.Command {
	var runs int
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the pg_cron job that reaps this database and its last runs",
		Example: `  backoffctl cron status
  backoffctl cron status --runs 20`,
		Args: exactArgs(0, ""),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if _, err := wantJSON(cmd); err != nil {
				return err
			}
			if runs < 0 {
				return usagef("--runs %d: want 0 or more", runs)
			}
			ctx := cmd.Context()
			t, err := openCron(ctx, cmd, false)
			if err != nil {
				return err
			}
			defer t.close(ctx)
			cur, err := t.job(ctx)
			if err != nil {
				return err
			}
			w := cmd.OutOrStdout()
			if cur == nil {
				fmt.Fprintf(w, "no pg_cron job %s: `backoffctl cron install` schedules one\n", t.name)
				return nil
			}
			fmt.Fprintf(w, "pg_cron job %d (%s): %q on %q in database %s as %s, active %t\n",
				cur.ID, t.name, cur.Command, cur.Schedule, cur.Database, cur.User, cur.Active)
			if runs == 0 {
				return nil
			}
			rows, err := t.cron.Query(ctx, `SELECT status, coalesce(return_message, ''), start_time, end_time
				FROM cron.job_run_details WHERE jobid = $1 ORDER BY start_time DESC NULLS LAST LIMIT $2`, cur.ID, runs)
			if err != nil {
				return fmt.Errorf("read pg_cron runs: %w", err)
			}
			defer rows.Close()
			tw := newTable(w)
			row(tw, "STARTED", "DURATION", "STATUS", "MESSAGE")
			n := 0
			for rows.Next() {
				var status, msg string
				var start, end *time.Time
				if err := rows.Scan(&status, &msg, &start, &end); err != nil {
					return fmt.Errorf("read pg_cron runs: %w", err)
				}
				dur := "-"
				if start != nil && end != nil {
					dur = formatDelay(end.Sub(*start).Round(time.Microsecond))
				}
				row(tw, formatTime(start), dur, status, oneLine(msg))
				n++
			}
			if err := rows.Err(); err != nil {
				return fmt.Errorf("read pg_cron runs: %w", err)
			}
			if n == 0 {
				fmt.Fprintln(w, "no runs yet")
				return nil
			}
			return tw.Flush()
		},
	}
	cmd.Flags().Bool("schedules", false, "the job that fires periodic jobs, not the reaper")
	cmd.Flags().IntVar(&runs, "runs", 5, "show this many of the last runs")
	return cmd
}
