package torture

import (
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/jackc/pgx/v5"
)

// The queues the sessions work on; the schedules enqueue into the last two.
var (
	jobQueues = []string{"torture-a", "torture-b", "torture-c"}
	dbQueue   = "torture-sched-db"   // fired on the database clock only
	skewQueue = "torture-sched-skew" // fired on skewed host clocks too
	allQueues = append(append([]string(nil), jobQueues...), dbQueue, skewQueue)
)

// schedules, by name: the first three are fired by callers on the
// database clock only, the last two by skewed clocks as well.
var schedules = []struct {
	name, queue, timing, catchUp string
	cron                         bool
}{
	{"db-every-second-all", dbQueue, "1 second", "all", false},
	{"db-every-minute-all", dbQueue, "* * * * *", "all", true},
	{"db-every-2s-latest", dbQueue, "2 seconds", "latest", false},
	{"skew-every-second-all", skewQueue, "1 second", "all", false},
	{"skew-every-3s-latest", skewQueue, "3 seconds", "latest", false},
}

// setup prepares a fresh database for a run: small segments, so that
// switches and truncations happen every few seconds; a policy with a lease
// and backoff on the simulated clock; the schedules; a role for the skewed
// firers, scoped to skewQueue, so that the database-clock schedules have
// no other firer; and a log of every row inserted into or deleted from
// backoff.jobs, written by a trigger in the transaction that changes the
// row. A TRUNCATE fires no row trigger: a job that the log says is there
// and the table does not hold was destroyed without a DELETE.
func setup(ctx context.Context, conn *pgx.Conn, rng *rand.Rand, firer string) (segmentJobs int, err error) {
	segmentJobs = 50 + rng.IntN(151)
	stmts := []string{
		fmt.Sprintf(`UPDATE backoff.settings SET segment_jobs = %d`, segmentJobs),
		`INSERT INTO backoff.policies (name, strategy, base, max_delay, max_attempts, lease)
		 VALUES ('torture', 'fixed', '5 seconds', '1 minute', 4, '40 seconds')`,
		`CREATE SCHEMA torture`,
		`CREATE TABLE torture.row_log (
			n         bigserial PRIMARY KEY,
			job       bigint NOT NULL,
			op        "char" NOT NULL,
			segment   smallint NOT NULL,
			status    text NOT NULL,
			attempts  integer NOT NULL,
			schedule  text,
			slot      timestamptz)`,
		`CREATE FUNCTION torture.log_row() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			IF TG_OP = 'DELETE' THEN
				INSERT INTO torture.row_log (job, op, segment, status, attempts, schedule, slot)
				VALUES (OLD.id, 'D', OLD.segment, OLD.status, OLD.attempts, OLD.schedule, OLD.schedule_slot);
			ELSE
				INSERT INTO torture.row_log (job, op, segment, status, attempts, schedule, slot)
				VALUES (NEW.id, 'I', NEW.segment, NEW.status, NEW.attempts, NEW.schedule, NEW.schedule_slot);
			END IF;
			RETURN NULL;
		END
		$$`,
		// The functions are SECURITY DEFINER: the trigger runs as their owner.
		`GRANT USAGE ON SCHEMA torture TO PUBLIC`,
		`GRANT INSERT ON torture.row_log TO PUBLIC`,
		`GRANT USAGE ON SEQUENCE torture.row_log_n_seq TO PUBLIC`,
		`CREATE TRIGGER torture_log AFTER INSERT OR DELETE ON backoff.jobs
		 FOR EACH ROW EXECUTE FUNCTION torture.log_row()`,
		// Each truncation of a segment, and the isolation level of the
		// transaction that made it: what a lost job's report names.
		`CREATE TABLE torture.truncations (
			n         bigint NOT NULL DEFAULT nextval('torture.row_log_n_seq'),
			segment   smallint NOT NULL,
			isolation text NOT NULL)`,
		`CREATE FUNCTION torture.log_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO torture.truncations (segment, isolation)
			VALUES (TG_ARGV[0]::smallint, current_setting('transaction_isolation'));
			RETURN NULL;
		END
		$$`,
		`GRANT INSERT ON torture.truncations TO PUBLIC`,
		fmt.Sprintf(`GRANT backoff_worker TO %s`, pgx.Identifier{firer}.Sanitize()),
	}
	for seg := 1; seg <= 3; seg++ {
		stmts = append(stmts, fmt.Sprintf(`CREATE TRIGGER torture_truncate AFTER TRUNCATE ON backoff.jobs_live_%d
			FOR EACH STATEMENT EXECUTE FUNCTION torture.log_truncate('%d')`, seg, seg))
	}
	for _, q := range allQueues {
		stmts = append(stmts, fmt.Sprintf(`INSERT INTO backoff.queues (name, policy) VALUES ('%s', 'torture')`, q))
	}
	for _, s := range schedules {
		timing := fmt.Sprintf(`p_every => '%s'`, s.timing)
		if s.cron {
			timing = fmt.Sprintf(`p_cron => '%s'`, s.timing)
		}
		stmts = append(stmts, fmt.Sprintf(
			`SELECT backoff.put_schedule('%s', '%s', %s, p_catch_up => '%s', p_catch_up_limit => 10000)`,
			s.name, s.queue, timing, s.catchUp))
	}
	stmts = append(stmts,
		fmt.Sprintf(`SELECT backoff.grant_queue('%s', '%s', 'work')`, firer, skewQueue))
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return 0, fmt.Errorf("setup: %w\n%s", err, s)
		}
	}
	return segmentJobs, nil
}
