package security

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/migrations"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// fixtures are jobs in known states, committed by the superuser; each check
// runs in a transaction that is rolled back, so every check sees them as
// they are here.
type fixtures struct {
	pending, running, expired, dead int64
	now                             time.Time
}

func makeFixtures(t *testing.T, pool *pgxpool.Pool) fixtures {
	t.Helper()
	ctx := context.Background()
	f := fixtures{now: t0.Add(time.Minute)}
	q := func(sql string, args ...any) int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, sql, args...).Scan(&id), sql)
		return id
	}
	f.pending = q(`SELECT backoff.enqueue('pending', p_now => $1)`, t0)
	f.running = q(`SELECT backoff.enqueue('running', p_now => $1)`, t0)
	q(`SELECT id FROM backoff.claim('running', 'w0', 1, '1 hour', $1)`, t0)
	f.expired = q(`SELECT backoff.enqueue('expired', p_now => $1)`, t0)
	q(`SELECT id FROM backoff.claim('expired', 'w0', 1, '1 second', $1)`, t0)
	f.dead = q(`SELECT backoff.enqueue('dead', p_now => $1)`, t0)
	q(`SELECT id FROM backoff.claim('dead', 'w0', 1, '1 hour', $1)`, t0)
	q(`SELECT id FROM backoff.fail($1, 1, 'poison', NULL, false, $2)`, f.dead, t0)
	_, err := pool.Exec(ctx, `SELECT backoff.put_schedule('s', 'scheduled', p_cron => '* * * * *', p_now => $1)`, t0)
	require.NoError(t, err)
	return f
}

// check is one statement and the roles that may run it.
type check struct {
	name    string
	sql     string
	args    func(f fixtures) []any
	allowed []string
}

const (
	producer = "backoff_producer"
	worker   = "backoff_worker"
	admin    = "backoff_admin"
)

var roles = []string{producer, worker, admin}

func checks() []check {
	now := func(f fixtures) []any { return []any{f.now} }
	return []check{
		{"enqueue", `SELECT backoff.enqueue('q2', '{}'::jsonb, p_now => $1)`, now, []string{producer, admin}},
		{"schema_version", `SELECT backoff.schema_version()`, nil, roles},
		{"claim", `SELECT * FROM backoff.claim('pending', 'w', 1, NULL, $1)`, now, []string{worker, admin}},
		{"acquire", `SELECT * FROM backoff.acquire($1, 'w', NULL, $2)`,
			func(f fixtures) []any { return []any{f.pending, f.now} }, []string{worker, admin}},
		{"complete", `SELECT * FROM backoff.complete($1, 1, $2)`,
			func(f fixtures) []any { return []any{f.running, f.now} }, []string{worker, admin}},
		{"complete_many", `SELECT backoff.complete_many(ARRAY[$1::bigint], ARRAY[1], $2)`,
			func(f fixtures) []any { return []any{f.running, f.now} }, []string{worker, admin}},
		{"fail", `SELECT * FROM backoff.fail($1, 1, 'boom', NULL, true, $2)`,
			func(f fixtures) []any { return []any{f.running, f.now} }, []string{worker, admin}},
		{"heartbeat", `SELECT backoff.heartbeat($1, 1, NULL, $2)`,
			func(f fixtures) []any { return []any{f.running, f.now} }, []string{worker, admin}},
		{"snooze", `SELECT * FROM backoff.snooze($1, 1, '1 minute', $2)`,
			func(f fixtures) []any { return []any{f.running, f.now} }, []string{worker, admin}},
		{"reap", `SELECT backoff.reap($1)`, now, []string{worker, admin}},
		{"retry_delay", `SELECT backoff.retry_delay('moderate', 1)`, nil, []string{worker, admin}},
		{"schedule", `SELECT * FROM backoff.schedule('moderate')`, nil, []string{worker, admin}},
		{"cancel", `SELECT * FROM backoff.cancel($1, 'no', $2)`,
			func(f fixtures) []any { return []any{f.pending, f.now} }, []string{admin}},
		{"replay", `SELECT * FROM backoff.replay($1, $2)`,
			func(f fixtures) []any { return []any{f.dead, f.now} }, []string{admin}},
		{"prune", `SELECT backoff.prune('0 seconds', 10, $1)`, now, []string{admin}},
		{"stats", `SELECT * FROM backoff.stats('1 hour', $1)`, now, []string{admin}},
		{"liveness", `SELECT * FROM backoff.liveness('1 minute', $1)`, now, []string{admin}},
		{"read maintenance", `SELECT * FROM backoff.maintenance`, nil, []string{admin}},
		{"write maintenance", `UPDATE backoff.maintenance SET ran_at = NULL`, nil, nil},
		{"write maintenance_workers", `INSERT INTO backoff.maintenance_workers VALUES ('w', now())`, nil, nil},
		{"private note", `SELECT backoff._note_maintenance('reap', 'w', now())`, nil, nil},
		// The operator reads show every queue's jobs and payloads: admin
		// only; the policies are no secret from workers (docs/adr/0072).
		{"list_jobs", `SELECT * FROM backoff.list_jobs()`, nil, []string{admin}},
		{"count_jobs", `SELECT backoff.count_jobs()`, nil, []string{admin}},
		{"job_detail", `SELECT * FROM backoff.job_detail($1)`, func(f fixtures) []any { return []any{f.dead} }, []string{admin}},
		{"job_graph", `SELECT * FROM backoff.job_graph($1)`, func(f fixtures) []any { return []any{f.dead} }, []string{admin}},
		{"queue_history", `SELECT * FROM backoff.queue_history()`, nil, []string{admin}},
		{"dead_letter_groups", `SELECT * FROM backoff.dead_letter_groups()`, nil, []string{admin}},
		{"dead_letter_reasons", `SELECT * FROM backoff.dead_letter_reasons()`, nil, []string{admin}},
		{"dead_letter_sample", `SELECT * FROM backoff.dead_letter_sample()`, nil, []string{admin}},
		{"policy_list", `SELECT * FROM backoff.policy_list()`, nil, []string{worker, admin}},
		{"grant_queue", `SELECT backoff.grant_queue('backoff_worker', 'q*', 'work')`, nil, []string{admin}},
		{"revoke_queue", `SELECT backoff.revoke_queue('backoff_worker', 'q*', 'work')`, nil, []string{admin}},
		{"write queue_grants", `INSERT INTO backoff.queue_grants VALUES ('backoff_worker'::regrole, 'q', 'work', 'q')`, nil, nil},
		{"read queue_grants", `SELECT * FROM backoff.queue_grants`, nil, []string{admin}},
		{"put_schedule", `SELECT backoff.put_schedule('s2', 'q', p_cron => '* * * * *', p_now => $1)`, now, []string{admin}},
		{"pause_schedule", `SELECT backoff.pause_schedule('s', $1)`, now, []string{admin}},
		{"resume_schedule", `SELECT backoff.resume_schedule('s', $1)`, now, []string{admin}},
		{"drop_schedule", `SELECT backoff.drop_schedule('s')`, nil, []string{admin}},
		{"fire_schedules", `SELECT * FROM backoff.fire_schedules(10, $1)`, now, []string{worker, admin}},
		{"schedule_fires", `SELECT * FROM backoff.schedule_fires('s')`, nil, []string{worker, admin}},
		// Names every schedule, as backoff.schedules does: admin only.
		{"upcoming_fires", `SELECT * FROM backoff.upcoming_fires(p_now => $1)`, now, []string{admin}},
		{"schedule_list", `SELECT * FROM backoff.schedule_list()`, nil, []string{admin}},
		// Workflows (docs/adr/0087): producers enqueue graphs, workers
		// read what a job's parents left it, both read an output, admins
		// release a waiting job; the edges and outputs are read through
		// the functions, never the tables.
		{"enqueue_graph", `SELECT * FROM backoff.enqueue_graph('[{"ref": "a", "queue": "q2"}]', $1)`, now, []string{producer, admin}},
		{"job_output", `SELECT backoff.job_output($1)`, func(f fixtures) []any { return []any{f.dead} }, []string{producer, worker, admin}},
		{"parent_outputs", `SELECT * FROM backoff.parent_outputs($1)`, func(f fixtures) []any { return []any{f.dead} }, []string{worker, admin}},
		{"read job_outputs", `SELECT * FROM backoff.job_outputs`, nil, []string{admin}},
		{"read job_dependencies", `SELECT * FROM backoff.job_dependencies`, nil, []string{admin}},
		{"write job_blockers", `INSERT INTO backoff.job_blockers VALUES (1, 1, 0)`, nil, nil},
		{"read schedules", `SELECT * FROM backoff.schedules`, nil, []string{admin}},
		{"write schedules", `UPDATE backoff.schedules SET cron = '61 * * * *'`, nil, nil},
		{"select jobs", `SELECT count(*) FROM backoff.jobs`, nil, []string{admin}},
		{"update jobs", `UPDATE backoff.jobs SET status = 'completed', lease_until = NULL WHERE id = $1`,
			func(f fixtures) []any { return []any{f.running} }, []string{admin}},
		{"delete jobs", `DELETE FROM backoff.jobs WHERE id = $1`,
			func(f fixtures) []any { return []any{f.dead} }, []string{admin}},
		{"insert jobs", `INSERT INTO backoff.jobs (queue, run_at, created_at) VALUES ('x', now(), now())`, nil, []string{admin}},
		{"truncate jobs", `TRUNCATE backoff.jobs`, nil, nil},
		{"update policies", `UPDATE backoff.policies SET max_attempts = 1 WHERE name = 'default'`, nil, []string{admin}},
		{"insert queues", `INSERT INTO backoff.queues (name, policy) VALUES ('evil', 'default')`, nil, []string{admin}},
		{"private helper", `SELECT backoff._jitter_unit(1, 1)`, nil, nil},
		{"create function in schema", `CREATE FUNCTION backoff.evil() RETURNS int LANGUAGE sql AS 'SELECT 1'`, nil, nil},
		{"version table write", `DELETE FROM backoff.schema_migrations`, nil, nil},
	}
}

// TestRolePrivileges runs every check as every role: what is allowed
// succeeds, what is not fails with insufficient_privilege (42501).
func TestRolePrivileges(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	f := makeFixtures(t, pool)
	for _, c := range checks() {
		for _, role := range roles {
			t.Run(c.name+"/"+role, func(t *testing.T) {
				var args []any
				if c.args != nil {
					args = c.args(f)
				}
				err := asRole(ctx, pool, role, c.sql, args...)
				if slices.Contains(c.allowed, role) {
					require.NoError(t, err, "%s should be allowed to %s", role, c.name)
				} else {
					require.Error(t, err, "%s must not be allowed to %s", role, c.name)
					require.Equal(t, "42501", sqlState(err), "%s %s: want insufficient_privilege, got %v", role, c.name, err)
				}
			})
		}
	}
	// The fixtures are untouched: every check was rolled back, and none
	// leaked a change through a definer function.
	var statuses []string
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(status ORDER BY id) FROM backoff.jobs`).Scan(&statuses))
	require.Equal(t, []string{"pending", "running", "running", "dead_lettered"}, statuses)
}

// TestClientUnderRoles runs the Go client logged in as a producer (enqueue
// works, claim is refused) and as a worker (a Worker processes the job;
// enqueue and replay are refused).
func TestClientUnderRoles(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dbURL := testdb.NewURL(t)

	prodPool := testdb.Pool(t, testdb.LoginRole(t, dbURL, producer))
	prod, err := client.New(ctx, prodPool)
	require.NoError(t, err, "a producer can check the schema version")
	id, err := prod.Enqueue(ctx, "mail", map[string]string{"to": "a@example.com"})
	require.NoError(t, err)
	_, err = prod.Claim(ctx, "mail", 1, time.Minute)
	require.Equal(t, "42501", sqlState(err), "producer claim: %v", err)

	workPool := testdb.Pool(t, testdb.LoginRole(t, dbURL, worker))
	wc, err := client.New(ctx, workPool)
	require.NoError(t, err)
	_, err = wc.Enqueue(ctx, "mail", nil)
	require.Equal(t, "42501", sqlState(err), "worker enqueue: %v", err)
	_, err = ops.New(workPool).Replay(ctx, id)
	require.Equal(t, "42501", sqlState(err), "worker replay: %v", err)

	done := make(chan int64, 1)
	w, err := client.NewWorker(workPool, client.WorkerConfig{
		Queue:        "mail",
		PollInterval: 50 * time.Millisecond,
		Handler: func(_ context.Context, j *client.Job) error {
			done <- j.ID
			return nil
		},
	})
	require.NoError(t, err)
	wctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- w.Run(wctx) }()
	select {
	case got := <-done:
		require.Equal(t, id, got)
	case <-ctx.Done():
		t.Fatal("the worker role's Worker never ran the job")
	}
	stop()
	require.NoError(t, <-errc)
	j, err := wc.Get(ctx, id)
	require.NoError(t, err, "a worker may read jobs")
	require.Equal(t, client.StatusCompleted, j.Status)
}

// TestFunctionAttributes: every public function is SECURITY DEFINER with
// search_path pinned to pg_catalog, pg_temp; every function of the schema
// is owned by backoff_owner, which is not a superuser and cannot log in;
// no function is executable by PUBLIC, and functions the owner creates
// later will not be either (default privileges).
func TestFunctionAttributes(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t)
	rows, err := pool.Query(ctx, `
SELECT p.oid::regprocedure::text, p.proname LIKE '\_%', p.prokind = 'p', p.prosecdef,
       coalesce(array_to_string(p.proconfig, ';'), ''), r.rolname, r.rolsuper, r.rolcanlogin,
       EXISTS (SELECT FROM aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) AS a
               WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
FROM pg_proc AS p JOIN pg_roles AS r ON r.oid = p.proowner
WHERE p.pronamespace = 'backoff'::regnamespace
ORDER BY 1`)
	require.NoError(t, err)
	n := 0
	for rows.Next() {
		var sig, config, owner string
		var private, procedure, definer, super, login, public bool
		require.NoError(t, rows.Scan(&sig, &private, &procedure, &definer, &config, &owner, &super, &login, &public))
		n++
		require.Equal(t, "backoff_owner", owner, sig)
		require.False(t, super, "%s: owner must not be a superuser", sig)
		require.False(t, login, "%s: owner must not log in", sig)
		require.False(t, public, "%s: PUBLIC may execute it", sig)
		if procedure {
			// backoff.maintain commits between its rounds, which PostgreSQL
			// allows a procedure only without SECURITY DEFINER and SET
			// clauses: it runs as its caller, who needs EXECUTE on the
			// functions it calls, and qualifies every name and operator.
			require.False(t, definer, "%s: a procedure that commits cannot be SECURITY DEFINER", sig)
			require.Empty(t, config, "%s: a procedure that commits cannot have SET clauses", sig)
			continue
		}
		if !private {
			require.True(t, definer, "%s must be SECURITY DEFINER", sig)
			// Planner settings may follow (complete_many turns nested
			// loops off; claim, acquire, heartbeat, complete, fail,
			// complete_many and reap use generic plans only, docs/adr/0041
			// and 0061); the search_path comes first and is pinned.
			settings := strings.Split(config, ";")
			require.Equal(t, "search_path=pg_catalog, pg_temp", settings[0], "%s: search_path must be pinned", sig)
			name, _, _ := strings.Cut(sig, "(")
			switch name {
			case "backoff.claim", "backoff.acquire", "backoff.heartbeat", "backoff.complete", "backoff.complete_many", "backoff.fail", "backoff.reap":
				require.Contains(t, settings, "plan_cache_mode=force_generic_plan", sig)
			}
		}
	}
	require.NoError(t, rows.Err())
	require.Greater(t, n, 20)

	for _, table := range []string{"backoff.jobs", "backoff.policies", "backoff.queues"} {
		var owner string
		require.NoError(t, pool.QueryRow(ctx, `SELECT relowner::regrole::text FROM pg_class WHERE oid = $1::regclass`, table).Scan(&owner))
		require.Equal(t, "backoff_owner", owner, table)
	}

	// A function the owner creates later is not executable by PUBLIC.
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SET LOCAL ROLE backoff_owner`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `CREATE FUNCTION backoff.later() RETURNS int LANGUAGE sql AS 'SELECT 1'`)
	require.NoError(t, err)
	var public bool
	require.NoError(t, tx.QueryRow(ctx, `SELECT has_function_privilege('backoff_worker', 'backoff.later()', 'EXECUTE')`).Scan(&public))
	require.False(t, public, "a new function of the owner is executable by every role (default privileges missing)")
}

// TestMigrationIdempotentAcrossDatabases: many databases on one server
// migrate concurrently (as the test harness does); the roles are created
// once, and migrating one database down to 2 (roles section removed) and up
// again leaves the other databases' grants alone.
func TestMigrationIdempotentAcrossDatabases(t *testing.T) {
	ctx := context.Background()
	var urls []string
	for i := 0; i < 4; i++ {
		urls = append(urls, testdb.NewEmptyURL(t))
	}
	// Each migrates as `backoffctl migrate up` does, at the same time.
	errs := make(chan error, len(urls))
	for _, u := range urls {
		go func() {
			conn, err := pgx.Connect(ctx, u)
			if err != nil {
				errs <- err
				return
			}
			defer conn.Close(ctx)
			m, err := migrations.New(ctx, conn)
			if err == nil {
				_, _, err = m.MigrateTo(ctx, migrations.Latest())
			}
			errs <- err
		}()
	}
	for range urls {
		require.NoError(t, <-errs)
	}
	migrateTo(t, urls[0], 2)
	for i, u := range urls {
		pool := testdb.Pool(t, u)
		var owner string
		require.NoError(t, pool.QueryRow(ctx, `SELECT relowner::regrole::text FROM pg_class WHERE oid = 'backoff.jobs'::regclass`).Scan(&owner))
		var roles int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname IN ('backoff_owner', 'backoff_producer', 'backoff_worker', 'backoff_admin')`).Scan(&roles))
		require.Equal(t, 4, roles, "the roles survive a down migration")
		if i == 0 {
			require.NotEqual(t, "backoff_owner", owner, "down gives the tables back to the migrating user")
			continue
		}
		require.Equal(t, "backoff_owner", owner)
		// A new install requires queue grants (docs/adr/0058).
		_, err := pool.Exec(ctx, `SELECT backoff.grant_queue('backoff_worker', '*', 'work')`)
		require.NoError(t, err)
		require.NoError(t, asRole(ctx, pool, worker, `SELECT * FROM backoff.claim('q', 'w')`), "database %d", i)
	}
	migrateTo(t, urls[0], migrations.Latest())
	_, err := testdb.Pool(t, urls[0]).Exec(ctx, `SELECT backoff.grant_queue('backoff_worker', '*', 'work')`)
	require.NoError(t, err)
	require.NoError(t, asRole(ctx, testdb.Pool(t, urls[0]), worker, `SELECT * FROM backoff.claim('q', 'w')`))
}
