package security

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/distribution"
	"github.com/pgbackoff/pgbackoff/internal/migrations"
	"github.com/pgbackoff/pgbackoff/internal/router"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// installPlants are look-alikes of what the install SQL calls, planted in
// public by a role that may CREATE there (any database created before
// PostgreSQL 15). Each is a better match than pg_catalog's for the
// arguments the install passes (pg_catalog's array_position and format are
// polymorphic or variadic; float8 = integer needs a cast), so an
// unqualified call resolved through the installer's search_path binds to
// it. Each records who ran it in public.calls, then does the real thing, so
// the install succeeds and the hijack stays silent, as a real one would.
var installPlants = []string{
	`CREATE TABLE public.calls (fn text NOT NULL, by_user text NOT NULL DEFAULT current_user)`,
	`GRANT INSERT, SELECT ON public.calls TO PUBLIC`,
	`CREATE FUNCTION public.array_position(interval[], interval) RETURNS integer LANGUAGE sql AS
	 $$INSERT INTO public.calls (fn) VALUES ('array_position') RETURNING NULL::integer$$`,
	`CREATE FUNCTION public.cardinality(interval[]) RETURNS integer LANGUAGE sql AS
	 $$INSERT INTO public.calls (fn) VALUES ('cardinality') RETURNING 1$$`,
	`CREATE FUNCTION public.format(text, pg_catalog.regprocedure) RETURNS text LANGUAGE sql AS
	 $$INSERT INTO public.calls (fn) VALUES ('format') RETURNING pg_catalog.format($1, $2)$$`,
	`CREATE FUNCTION public.evil_eq(float8, integer) RETURNS boolean LANGUAGE sql AS
	 $$INSERT INTO public.calls (fn) VALUES ('float8 = integer') RETURNING $1 OPERATOR(pg_catalog.=) $2::float8$$`,
	`CREATE OPERATOR public.= (LEFTARG = float8, RIGHTARG = integer, FUNCTION = public.evil_eq)`,
	`CREATE FUNCTION public.evil_ge(float8, integer) RETURNS boolean LANGUAGE sql AS
	 $$INSERT INTO public.calls (fn) VALUES ('float8 >= integer') RETURNING $1 OPERATOR(pg_catalog.>=) $2::float8$$`,
	`CREATE OPERATOR public.>= (LEFTARG = float8, RIGHTARG = integer, FUNCTION = public.evil_ge)`,
}

// plantedDB is an empty database where PUBLIC may CREATE in schema public
// and a stranger has planted installPlants there. It returns the
// superuser's URL (the installer, with the default search_path "$user",
// public) and a connection of the installer.
func plantedDB(t *testing.T) (string, *pgx.Conn) {
	t.Helper()
	ctx := context.Background()
	dbURL := testdb.NewEmptyURL(t)
	super, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(func() { super.Close(context.Background()) })
	_, err = super.Exec(ctx, `GRANT USAGE, CREATE ON SCHEMA public TO PUBLIC`)
	require.NoError(t, err)
	plant(t, dbURL)
	return dbURL, super
}

// plant logs in as a stranger (a plain LOGIN role, not a superuser) and
// plants installPlants in public.
func plant(t *testing.T, dbURL string) {
	t.Helper()
	plantAs(t, dbURL, "backoff_test_stranger_", installPlants)
}

// plantAs runs plants in dbURL as a new plain LOGIN role named with
// prefix.
func plantAs(t *testing.T, dbURL, prefix string, plants []string) {
	t.Helper()
	ctx := context.Background()
	name := testdb.TempRole(t, prefix, "LOGIN PASSWORD 'pw'")
	// Runs before tempRole's drop: the test database (and the plants in
	// it) are dropped by testdb after this, so drop what the role owns
	// there explicitly.
	t.Cleanup(func() {
		if d, err := pgx.Connect(ctx, dbURL); err == nil {
			_, _ = d.Exec(ctx, "DROP OWNED BY "+pgx.Identifier{name}.Sanitize()+" CASCADE")
			d.Close(ctx)
		}
	})
	u, err := url.Parse(dbURL)
	require.NoError(t, err)
	u.User = url.UserPassword(name, "pw")
	stranger, err := pgx.Connect(ctx, u.String())
	require.NoError(t, err)
	defer stranger.Close(ctx)
	for _, p := range plants {
		_, err := stranger.Exec(ctx, p)
		require.NoError(t, err, p)
	}
}

// requireNoPlantRan proves the plants are live for an unqualified call in
// the installer's own session (so their absence below means something),
// then that nothing of the install called them or is bound to them: no
// recorded call, no dependency of any object on a function or operator of
// schema public, and a policy write (what `config apply` does as the
// admin, where a bound constraint would run the plant again) records none.
func requireNoPlantRan(t *testing.T, super *pgx.Conn, route string) {
	t.Helper()
	ctx := context.Background()
	var calls []string
	require.NoError(t, super.QueryRow(ctx, `SELECT coalesce(array_agg(fn || ' as ' || by_user), '{}') FROM public.calls`).Scan(&calls))
	require.Empty(t, calls, "%s: planted objects ran during the install", route)

	var bound []string
	require.NoError(t, super.QueryRow(ctx, `
		SELECT coalesce(array_agg(pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)
		                          || ' -> ' || pg_catalog.pg_describe_object(d.refclassid, d.refobjid, 0)), '{}')
		FROM pg_catalog.pg_depend AS d
		WHERE ((d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass
		        AND d.refobjid IN (SELECT p.oid FROM pg_catalog.pg_proc AS p WHERE p.pronamespace = 'public'::pg_catalog.regnamespace))
		    OR (d.refclassid = 'pg_catalog.pg_operator'::pg_catalog.regclass
		        AND d.refobjid IN (SELECT o.oid FROM pg_catalog.pg_operator AS o WHERE o.oprnamespace = 'public'::pg_catalog.regnamespace)))
		  -- (the plants' own operators depend on their functions)
		  AND NOT (d.classid = 'pg_catalog.pg_operator'::pg_catalog.regclass
		           AND d.objid IN (SELECT o.oid FROM pg_catalog.pg_operator AS o WHERE o.oprnamespace = 'public'::pg_catalog.regnamespace))`).Scan(&bound))
	require.Empty(t, bound, "%s: an installed object is bound to a plant", route)

	if route != "migrate down" {
		tx, err := super.Begin(ctx)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `INSERT INTO backoff.policies (name, strategy, schedule, multiplier, jitter_ratio)
			VALUES ('planted_check', 'schedule', '{1s,2s}', 1.5, 0)`)
		require.NoError(t, err)
		require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(array_agg(fn || ' as ' || by_user), '{}') FROM public.calls`).Scan(&calls))
		require.NoError(t, tx.Rollback(ctx))
		require.Empty(t, calls, "%s: a policy write ran planted objects bound at install", route)
	}

	// The plants are live: the same session's unqualified calls reach them.
	tx, err := super.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT array_position('{1s}'::interval[], '1s'::interval), 1.0::float8 = 1`)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, `SELECT array_agg(fn ORDER BY fn) FROM public.calls`).Scan(&calls))
	require.Equal(t, []string{"array_position", "float8 = integer"}, calls, "the plants must be live for the installer's unqualified SQL")
}

// migrateTo is `backoffctl migrate up` / `migrate down --target N` without
// the CLI: the migrator it runs, on a connection of its own with the
// database's default search_path, as the CLI's.
func migrateTo(t *testing.T, dbURL string, target int32) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	m, err := migrations.New(ctx, conn)
	require.NoError(t, err)
	_, _, err = m.MigrateTo(ctx, target)
	require.NoError(t, err, "migrate to %d", target)
}

// The attack: in a database where a stranger may create in
// public, `backoffctl migrate up` ran the stranger's array_position as the
// installing superuser and left it bound to backoff.policies' CHECK.
func TestInstallRouteMigrateUp(t *testing.T) {
	t.Parallel()
	dbURL, super := plantedDB(t)
	migrateTo(t, dbURL, migrations.Latest())
	requireNoPlantRan(t, super, "migrate up")
}

// dist/backoff.sql, run with psql as its header says.
func TestInstallRouteDistFile(t *testing.T) {
	t.Parallel()
	dbURL, super := plantedDB(t)
	file := filepath.Join("..", "..", "..", "dist", "backoff.sql")
	if psql, err := exec.LookPath("psql"); err == nil {
		out, err := exec.Command(psql, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-1", "-f", file, dbURL).CombinedOutput()
		require.NoError(t, err, "%s", out)
	} else {
		body, err := os.ReadFile(file)
		require.NoError(t, err)
		_, err = super.Exec(context.Background(), "BEGIN;\n"+string(body)+"\nCOMMIT;")
		require.NoError(t, err)
	}
	requireNoPlantRan(t, super, "dist/backoff.sql")
}

// CREATE EXTENSION backoff, where the extension files are installed (see
// TestCreateExtension in internal/distribution).
func TestInstallRouteCreateExtension(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, super := plantedDB(t)
	if srv := testdb.Server(t); srv.Controllable() {
		files, err := distribution.ExtensionFiles()
		require.NoError(t, err)
		require.NoError(t, srv.InstallExtensionFiles(ctx, files))
	} else {
		testdb.RequireExtensionFiles(t, "backoff")
	}
	_ = dbURL
	_, err := super.Exec(ctx, "CREATE EXTENSION backoff")
	require.NoError(t, err)
	requireNoPlantRan(t, super, "CREATE EXTENSION")
}

// migrate down, to 2 (migration 002's functions with the version 2 privileges)
// and then to 0, with the plants set after the install.
func TestInstallRouteMigrateDown(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := testdb.NewEmptyURL(t)
	super, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer super.Close(ctx)
	migrateTo(t, dbURL, migrations.Latest())
	_, err = super.Exec(ctx, `GRANT USAGE, CREATE ON SCHEMA public TO PUBLIC`)
	require.NoError(t, err)
	plant(t, dbURL)
	migrateTo(t, dbURL, 2)
	requireNoPlantRan(t, super, "migrate down")
	migrateTo(t, dbURL, 0)
	requireNoPlantRan(t, super, "migrate down")
}

// An install made before the search_path was pinned may already have its
// CHECK constraints bound to planted look-alikes. Migration 004 re-creates
// them qualified, so upgrading repairs it: version 3 is installed here the
// old way (migrations 1 to 3 run in the installer's session, search_path
// "$user", public), the binding is proven, then `migrate up` removes it.
func TestMigration004RepairsAHijackedInstall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL, super := plantedDB(t)
	m, err := migrations.New(ctx, super) // the schema and the version table
	require.NoError(t, err)
	_ = m
	ms, err := migrations.Load()
	require.NoError(t, err)
	tx, err := super.Begin(ctx)
	require.NoError(t, err)
	for _, mig := range ms[:3] {
		_, err := tx.Exec(ctx, mig.UpSQL)
		require.NoError(t, err, mig.Name)
	}
	_, err = tx.Exec(ctx, `UPDATE backoff.schema_migrations SET version = 3`)
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	var bound int
	require.NoError(t, super.QueryRow(ctx, `
		SELECT count(*) FROM pg_catalog.pg_depend AS d
		JOIN pg_catalog.pg_proc AS p ON d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid = d.refobjid
		WHERE p.pronamespace = 'public'::pg_catalog.regnamespace
		  AND d.classid = 'pg_catalog.pg_constraint'::pg_catalog.regclass`).Scan(&bound))
	require.Positive(t, bound, "the old way of installing binds the constraints to the plants")
	_, err = super.Exec(ctx, `DELETE FROM public.calls`)
	require.NoError(t, err)

	migrateTo(t, dbURL, migrations.Latest())
	requireNoPlantRan(t, super, "migrate up from a hijacked version 3")
}

// routerPlants are look-alikes of what the router's install runs: on the
// router, substr (in the shard-of-a-queue hash, an SQL-standard body bound
// when it is created) and <> on names (in the login check every forwarded
// call runs, a PL/pgSQL body resolved when it runs); on a shard, the aggregate max(bigint) (the job id
// range check). In a database whose search_path puts public before
// pg_catalog, an exact match in public wins over pg_catalog's own. Each
// records who ran it and then does the real thing.
var routerPlants = []string{
	`CREATE TABLE public.calls (fn text NOT NULL, by_user text NOT NULL DEFAULT current_user)`,
	`GRANT INSERT, SELECT ON public.calls TO PUBLIC`,
	`CREATE FUNCTION public.substr(text, integer, integer) RETURNS text LANGUAGE sql AS
	 $$INSERT INTO public.calls (fn) VALUES ('substr') RETURNING pg_catalog.substr($1, $2, $3)$$`,
	`CREATE FUNCTION public.evil_max_step(bigint, bigint) RETURNS bigint LANGUAGE sql AS
	 $$SELECT GREATEST($1, $2)$$`,
	`CREATE FUNCTION public.evil_max_final(bigint) RETURNS bigint LANGUAGE sql AS
	 $$INSERT INTO public.calls (fn) VALUES ('max') RETURNING $1$$`,
	`CREATE AGGREGATE public.max(bigint) (SFUNC = public.evil_max_step, STYPE = bigint, FINALFUNC = public.evil_max_final)`,
	`CREATE FUNCTION public.evil_name_ne(name, name) RETURNS boolean LANGUAGE sql AS
	 $$INSERT INTO public.calls (fn) VALUES ('<>') RETURNING $1 OPERATOR(pg_catalog.<>) $2$$`,
	`CREATE OPERATOR public.<> (LEFTARG = name, RIGHTARG = name, FUNCTION = public.evil_name_ne)`,
}

// publicFirstDB is an empty database whose owner set search_path = public,
// pg_catalog, where a stranger with CREATE on public planted routerPlants.
// It returns the superuser's URL; sessions opened on it get that
// search_path.
func publicFirstDB(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dbURL := testdb.NewEmptyURL(t)
	super, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer super.Close(ctx)
	var db string
	require.NoError(t, super.QueryRow(ctx, `SELECT current_database()`).Scan(&db))
	_, err = super.Exec(ctx, `GRANT USAGE, CREATE ON SCHEMA public TO PUBLIC`)
	require.NoError(t, err)
	_, err = super.Exec(ctx, `ALTER DATABASE `+pgx.Identifier{db}.Sanitize()+` SET search_path = public, pg_catalog`)
	require.NoError(t, err)
	plantAs(t, dbURL, "backoff_test_mallory_", routerPlants)
	return dbURL
}

// requirePlantsIdle proves that no plant of db ran or is bound to an
// installed object, then that the plants are live for the superuser's own
// unqualified SQL there (live calls the given SQL, which must record want).
func requirePlantsIdle(t *testing.T, dbURL, what, live string, want []string) {
	t.Helper()
	ctx := context.Background()
	super, err := pgx.Connect(ctx, dbURL)
	require.NoError(t, err)
	defer super.Close(ctx)
	var calls []string
	require.NoError(t, super.QueryRow(ctx, `SELECT coalesce(array_agg(fn || ' as ' || by_user), '{}') FROM public.calls`).Scan(&calls))
	require.Empty(t, calls, "%s: planted functions ran", what)
	var bound []string
	require.NoError(t, super.QueryRow(ctx, `
		SELECT coalesce(array_agg(pg_catalog.pg_describe_object(d.classid, d.objid, d.objsubid)
		                          || ' -> ' || pg_catalog.pg_describe_object(d.refclassid, d.refobjid, 0)), '{}')
		FROM pg_catalog.pg_depend AS d
		JOIN pg_catalog.pg_proc AS p ON d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass AND p.oid = d.refobjid
		WHERE p.pronamespace = 'public'::pg_catalog.regnamespace
		  AND NOT (d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
		           AND d.objid IN (SELECT q.oid FROM pg_catalog.pg_proc AS q WHERE q.pronamespace = 'public'::pg_catalog.regnamespace))
		  AND NOT (d.classid = 'pg_catalog.pg_operator'::pg_catalog.regclass
		           AND d.objid IN (SELECT o.oid FROM pg_catalog.pg_operator AS o WHERE o.oprnamespace = 'public'::pg_catalog.regnamespace))`).Scan(&bound))
	require.Empty(t, bound, "%s: an installed object is bound to a plant", what)

	tx, err := super.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, live)
	require.NoError(t, err)
	require.NoError(t, tx.QueryRow(ctx, `SELECT coalesce(array_agg(fn ORDER BY fn), '{}') FROM public.calls`).Scan(&calls))
	require.Equal(t, want, calls, "%s: the plants must be live for the installer's unqualified SQL", what)
}

// The attack on the router's install: where the owner of the router's and
// the shards' databases put public before pg_catalog in their search_path
// and a stranger planted look-alikes in public, `migrate up --router` bound
// the stranger's substr into backoff._queue_shard (which every queue-routed
// call then ran, as its caller: a superuser's call ran it as superuser) and
// ran the stranger's max(bigint) as the installer on each shard.
func TestInstallRouteRouter(t *testing.T) {
	t.Parallel()
	testdb.RequireServerExtension(t, "plproxy", "postgresql-15-plproxy")
	routerURL := publicFirstDB(t)
	shardURL := publicFirstDB(t)
	ctx := context.Background()
	super, err := pgx.Connect(ctx, routerURL)
	require.NoError(t, err)
	// migrate up --router
	require.NoError(t, router.Install(ctx, super, []router.Shard{{URL: shardURL}}))
	var shard int
	require.NoError(t, super.QueryRow(ctx, `SELECT backoff.router_queue_shard('mail')`).Scan(&shard))
	require.Zero(t, shard)
	// The login check every forwarded call runs first, under the
	// caller's search_path.
	_, err = super.Exec(ctx, `SELECT backoff._cluster()`)
	require.NoError(t, err)
	super.Close(ctx)

	requirePlantsIdle(t, shardURL, "shard", `SELECT max(x) FROM (VALUES (1::bigint)) AS v(x)`, []string{"max"})
	requirePlantsIdle(t, routerURL, "router", `SELECT substr('abc', 1, 2), session_user <> current_user`, []string{"<>", "substr"})
}
