// Package router installs a PL/Proxy router: a database whose backoff.*
// functions have the signatures of a shard's and forward every call to the
// shard that holds its queue or job (docs/sharding.md,
// docs/adr/0032-plproxy-router.md). The router's functions, types and views
// are generated from a shard's catalog at install time, so the router always
// matches the shards' schema; a public function without a routing rule
// (Rules) fails the install.
package router

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgbackoff/pgbackoff/client/sharding"
	"github.com/pgbackoff/pgbackoff/internal/migrations"
	sqlfiles "github.com/pgbackoff/pgbackoff/sql"
)

// ServerName is the SQL/MED server (FOREIGN DATA WRAPPER plproxy) that
// lists the shards; it is also the PL/Proxy cluster name.
const ServerName = "backoff_shards"

// ShardBits is where a job id carries its shard: shard k allocates the ids
// k<<48+1 .. (k+1)<<48-1 (docs/adr/0034-job-ids-carry-the-shard.md).
const ShardBits = 48

// MaxShards is the largest number of shards the id layout allows.
const MaxShards = 1 << (63 - ShardBits)

// IDRange is the range of job ids shard k allocates.
func IDRange(k int) (lo, hi int64) {
	return int64(k)<<ShardBits + 1, int64(k+1)<<ShardBits - 1
}

// ShardOfJob is the shard that holds job id.
func ShardOfJob(id int64) int { return int(id >> ShardBits) }

// QueueShard is the hash rule alone (sharding.QueueShard, the Go twin of
// the router's backoff._hash_shard): the shard of a queue that is not
// placed, with n the shard count of the router's first install. The router
// decides by its placements first (docs/adr/0091-placement-table.md).
func QueueShard(queue string, n int) int { return sharding.QueueShard(queue, n) }

// Shard is one shard database as the router reaches it.
type Shard struct {
	// URL connects the installer to the shard (and gives the router the
	// host, port and database it uses).
	URL string
	// Config, when set, is used instead of URL.
	Config *pgx.ConnConfig
}

// config is the shard's connection settings.
func (s Shard) config() (*pgx.ConnConfig, error) {
	if s.Config != nil {
		return s.Config, nil
	}
	return pgx.ParseConfig(s.URL)
}

// AddShard registers one more shard behind the router installed in the
// database of router, moving no queue: the shard is migrated and given the
// next range of job ids, and the router is reinstalled over its shards and
// the new one, keeping its layout (the hash rule stays that of the first
// install, the placements stay; docs/adr/0091-placement-table.md). The
// registered shards are reached at the addresses the router lists, with
// base's user, password and TLS settings. It returns the new shard's
// number.
func AddShard(ctx context.Context, router *pgx.Conn, base *pgx.ConnConfig, shard Shard) (int, error) {
	rows, err := router.Query(ctx, `SELECT s.shard, s.conninfo FROM backoff.router_shards() AS s ORDER BY s.shard`)
	if err != nil {
		return 0, fmt.Errorf("add shard: list the router's shards: %w", err)
	}
	listed, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (sharding.Shard, error) {
		var s sharding.Shard
		return s, r.Scan(&s.Number, &s.Conninfo)
	})
	if err != nil {
		return 0, fmt.Errorf("add shard: list the router's shards: %w", err)
	}
	newCfg, err := shard.config()
	if err != nil {
		return 0, fmt.Errorf("add shard: %w", err)
	}
	var shards []Shard
	for i, s := range listed {
		if s.Number != i {
			return 0, fmt.Errorf("add shard: the router lists shard %d in place %d", s.Number, i)
		}
		cfg, err := s.ConnConfig(base)
		if err != nil {
			return 0, fmt.Errorf("add shard: %w", err)
		}
		if cfg.Host == newCfg.Host && cfg.Port == newCfg.Port && cfg.Database == newCfg.Database {
			return 0, fmt.Errorf("add shard: %s:%d/%s is already shard %d", cfg.Host, cfg.Port, cfg.Database, i)
		}
		shards = append(shards, Shard{Config: cfg})
	}
	if err := install(ctx, router, append(shards, shard), len(shards)); err != nil {
		return 0, err
	}
	return len(shards), nil
}

// Install migrates every shard to the latest version, gives shard k its
// range of job ids, and (re)creates the router schema in the database of
// router: extension plproxy, the SQL/MED server listing the shards, and the
// generated backoff.* functions and views. Shard order is the shard
// numbering: a shard registered under another number is refused. The
// router's installer must be a superuser (PL/Proxy, and the catalog
// privileges that hide the shards' connection strings); every name of the
// install resolves in pg_catalog only, on the router and on the shards.
func Install(ctx context.Context, router *pgx.Conn, shards []Shard) error {
	return install(ctx, router, shards, -1)
}

// install is Install; registered, when not -1, is the number of shards the
// router must have now (AddShard read it: a shard added meanwhile by
// another installer would otherwise be replaced by the new one, under the
// same number and id range).
func install(ctx context.Context, router *pgx.Conn, shards []Shard, registered int) error {
	if len(shards) == 0 {
		return errors.New("install router: no shard given")
	}
	if len(shards) > MaxShards {
		return fmt.Errorf("install router: %d shards, at most %d", len(shards), MaxShards)
	}
	var (
		cat     *catalog
		servers []string
	)
	for k, s := range shards {
		cfg, err := s.config()
		if err != nil {
			return fmt.Errorf("install router: shard %d: %w", k, err)
		}
		// The installer's statements on the shard resolve names in
		// pg_catalog only, whatever search_path the database or the role
		// sets (a look-alike in an earlier schema would run as the
		// installer; docs/adr/0036, 0056).
		pinned := cfg.Copy()
		pinned.RuntimeParams["search_path"] = "pg_catalog"
		conn, err := pgx.ConnectConfig(ctx, pinned)
		if err != nil {
			return fmt.Errorf("install router: connect to shard %d: %w", k, err)
		}
		c, err := prepareShard(ctx, conn, k)
		conn.Close(ctx)
		if err != nil {
			return fmt.Errorf("install router: shard %d (%s:%d/%s): %w", k, cfg.Host, cfg.Port, cfg.Database, err)
		}
		if cat == nil {
			cat = c
		} else if d := cat.diff(c); d != "" {
			return fmt.Errorf("install router: shard %d's schema differs from shard 0's: %s", k, d)
		}
		servers = append(servers, fmt.Sprintf("p%d '%s'", k, quoteLit(conninfo(cfg))))
	}
	return pgx.BeginFunc(ctx, router, func(tx pgx.Tx) error {
		// Every name of the install resolves in pg_catalog: an SQL-standard
		// body (backoff._queue_shard) and the column types are bound when
		// they are created, with the installer's search_path, and would
		// otherwise bind to a look-alike that a database search_path
		// putting public first lets win (docs/adr/0056).
		if _, err := tx.Exec(ctx, `SET LOCAL search_path = pg_catalog`); err != nil {
			return fmt.Errorf("install router: %w", err)
		}
		var isShard bool
		if err := tx.QueryRow(ctx, `SELECT pg_catalog.to_regclass('backoff.schema_migrations') IS NOT NULL`).Scan(&isShard); err != nil {
			return fmt.Errorf("install router: %w", err)
		}
		if isShard {
			return errors.New("install router: the router database holds a pgbackoff schema (backoff.schema_migrations): a router must be its own database")
		}
		// The layout survives the reinstall: the hash rule's shard count
		// and the placements stay, so adding shards moves no queue
		// (docs/adr/0091-placement-table.md). No placement changes while
		// the router is rebuilt.
		var hasLayout bool
		if err := tx.QueryRow(ctx, `SELECT pg_catalog.to_regclass('backoff.router_placements') IS NOT NULL`).Scan(&hasLayout); err != nil {
			return fmt.Errorf("install router: %w", err)
		}
		if hasLayout {
			if _, err := tx.Exec(ctx, `LOCK TABLE backoff.router_layout, backoff.router_placements IN EXCLUSIVE MODE`); err != nil {
				return fmt.Errorf("install router: %w", err)
			}
		}
		old, had, err := readLayout(ctx, tx)
		if err != nil {
			return fmt.Errorf("install router: %w", err)
		}
		if !had {
			// A router installed before placements existed: its queues
			// follow the hash of its shard count, which the layout keeps.
			if n, ok, err := installedShards(ctx, tx); err != nil {
				return fmt.Errorf("install router: %w", err)
			} else if ok {
				old, had = Layout{Version: 1, HashShards: n, Shards: n, Placed: map[string]int{}}, true
			}
		}
		if registered >= 0 && (!had || old.Shards != registered) {
			return fmt.Errorf("install router: the router's shards changed while this shard was added (%d registered, %d expected): list them again", old.Shards, registered)
		}
		layout, err := nextLayout(old, had, len(shards))
		if err != nil {
			return fmt.Errorf("install router: %w", err)
		}
		sqls, err := cat.routerSQL(layout)
		if err != nil {
			return fmt.Errorf("install router: %w", err)
		}
		head := []string{
			// In pg_catalog, as plpgsql: no other schema's owner can
			// replace its handler functions.
			`CREATE EXTENSION IF NOT EXISTS plproxy SCHEMA pg_catalog`,
			rolesSQL,
			`DROP SCHEMA IF EXISTS backoff CASCADE`,
			`DROP SERVER IF EXISTS ` + ServerName + ` CASCADE`,
			`CREATE SCHEMA backoff`,
			`REVOKE ALL ON SCHEMA backoff FROM PUBLIC`,
			`GRANT USAGE ON SCHEMA backoff TO backoff_owner, backoff_producer, backoff_worker, backoff_admin`,
			`CREATE SERVER ` + ServerName + ` FOREIGN DATA WRAPPER plproxy OPTIONS (modular_mapping '1', ` + strings.Join(servers, ", ") + `)`,
			// Every caller logs into the shards as itself (PL/Proxy adds
			// user=CURRENT_USER): the shards check its privileges as they
			// would for a direct connection (docs/adr/0032).
			`GRANT USAGE ON FOREIGN SERVER ` + ServerName + ` TO backoff_owner, backoff_producer, backoff_worker, backoff_admin`,
			`CREATE USER MAPPING FOR PUBLIC SERVER ` + ServerName,
		}
		for _, q := range append(head, sqls...) {
			if _, err := tx.Exec(ctx, q); err != nil {
				return fmt.Errorf("install router: %w\n%s", err, q)
			}
		}
		return nil
	})
}

// installedShards is the number of shards of the router installed in the
// database (ok false when there is none).
func installedShards(ctx context.Context, tx pgx.Tx) (n int, ok bool, err error) {
	err = tx.QueryRow(ctx, `
SELECT count(*) FILTER (WHERE o ~ '^p[0-9]+='), count(*) > 0
FROM pg_catalog.pg_foreign_server AS s LEFT JOIN LATERAL unnest(s.srvoptions) AS o ON true
WHERE s.srvname = '`+ServerName+`'`).Scan(&n, &ok)
	return n, ok && n > 0, err
}

// conninfo is the libpq connection string PL/Proxy uses for a shard: its
// address and database; PL/Proxy adds user=CURRENT_USER, the caller.
func conninfo(cfg *pgx.ConnConfig) string {
	s := fmt.Sprintf("host=%s port=%d dbname=%s", cfg.Host, cfg.Port, cfg.Database)
	if cfg.TLSConfig == nil {
		s += " sslmode=disable"
	}
	return s
}

func quoteLit(s string) string { return strings.ReplaceAll(s, "'", "''") }

// rolesSQL creates pgbackoff's four roles on the router's server when they
// are missing: the loop of migration 003's first block, read from the same
// embedded file, so the router and a shard create the roles with one text.
// The rest of that block (granting backoff_owner to the installer) stays a
// shard's: the router's objects belong to the installing login.
var rolesSQL = func() string {
	body, err := fs.ReadFile(sqlfiles.Files, rolesMigration)
	if err != nil {
		// Embedded at build time: a missing file is a build defect that
		// TestRolesFromMigration catches.
		panic(err)
	}
	s := string(body)
	from := strings.Index(s, "DO $$")
	loopEnd := strings.Index(s, "    END LOOP;\n")
	if from < 0 || loopEnd < from {
		panic(rolesMigration + ": no role-creating DO block")
	}
	return s[from:loopEnd] + "    END LOOP;\nEND\n$$"
}()

// rolesMigration is the migration that creates the roles on a shard.
const rolesMigration = "migrations/003_roles.sql"

// prepareShard migrates a shard, registers its id range and reads its
// catalog.
func prepareShard(ctx context.Context, conn *pgx.Conn, k int) (*catalog, error) {
	m, err := migrations.New(ctx, conn)
	if err != nil {
		return nil, err
	}
	if _, _, err := m.MigrateTo(ctx, m.Latest()); err != nil {
		return nil, err
	}
	if err := registerIDRange(ctx, conn, k); err != nil {
		return nil, err
	}
	return readCatalog(ctx, conn)
}

// registerIDRange makes shard k's job ids come from IDRange(k). A shard
// whose sequence has another shard's range, or which holds jobs outside its
// range, is refused.
func registerIDRange(ctx context.Context, conn *pgx.Conn, k int) error {
	lo, hi := IDRange(k)
	var seq string
	var minV, maxV int64
	var maxID *int64
	err := conn.QueryRow(ctx, `
SELECT s.schemaname || '.' || s.sequencename, s.min_value, s.max_value, (SELECT max(id) FROM backoff.jobs)
FROM pg_catalog.pg_sequences AS s
WHERE (s.schemaname || '.' || s.sequencename)::regclass = pg_catalog.pg_get_serial_sequence('backoff.jobs', 'id')::regclass`).
		Scan(&seq, &minV, &maxV, &maxID)
	if err != nil {
		return fmt.Errorf("read the job id sequence: %w", err)
	}
	if minV == lo && maxV == hi {
		return nil
	}
	if minV != 1 || maxV != 1<<63-1 {
		return fmt.Errorf("its job ids are registered as shard %d's (%d..%d), not shard %d's: keep the shards in their order", ShardOfJob(minV), minV, maxV, k)
	}
	next := lo
	if maxID != nil {
		if *maxID > hi || (k > 0 && *maxID >= 1 && *maxID < lo) {
			return fmt.Errorf("it holds jobs with ids up to %d, outside shard %d's range %d..%d: only an empty database (or shard 0) can become shard %d", *maxID, k, lo, hi, k)
		}
		next = max(lo, *maxID+1)
	}
	_, err = conn.Exec(ctx, fmt.Sprintf(`ALTER TABLE backoff.jobs ALTER COLUMN id SET START WITH %d SET MINVALUE %d SET MAXVALUE %d RESTART WITH %d`, lo, lo, hi, next))
	if err != nil {
		return fmt.Errorf("register the job id range: %w", err)
	}
	return nil
}

// function is one public function of a shard, as the router recreates it.
type function struct {
	name, args, identity, result, retType string
	retSet, strict                        bool
	volatility                            string
	inputs                                []string // input argument names, in order
	inputTypes                            []string // their types
	comment                               *string
	grantees                              []string
}

// table is one table of a shard's backoff schema.
type table struct {
	name     string
	columns  []string // "name type"
	grantees []string // roles with SELECT
}

type catalog struct {
	functions []function
	tables    []table
	types     []string // CREATE TYPE statements of other composite and enum types
}

func readCatalog(ctx context.Context, conn *pgx.Conn) (*catalog, error) {
	c := &catalog{}
	err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		// Every type name comes out schema-qualified.
		if _, err := tx.Exec(ctx, `SET LOCAL search_path = pg_catalog`); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `
SELECT p.proname::text, pg_get_function_arguments(p.oid), pg_get_function_identity_arguments(p.oid),
       pg_get_function_result(p.oid), format_type(p.prorettype, NULL), p.proretset, p.proisstrict,
       p.provolatile::text, coalesce(p.proargnames, '{}'), coalesce(p.proargmodes::text[], '{}'), p.pronargs,
       obj_description(p.oid, 'pg_proc'),
       ARRAY(SELECT format_type(t, NULL) FROM unnest(p.proargtypes::oid[]) WITH ORDINALITY AS u(t, o) ORDER BY o),
       ARRAY(SELECT r.rolname::text FROM aclexplode(p.proacl) AS a JOIN pg_roles AS r ON r.oid = a.grantee
             WHERE a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner ORDER BY 1)
FROM pg_proc AS p
WHERE p.pronamespace = 'backoff'::regnamespace AND p.prokind = 'f' AND p.proname !~ '^_'
ORDER BY p.proname, pg_get_function_identity_arguments(p.oid)`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var f function
			var names, modes []string
			var nargs int16
			if err := rows.Scan(&f.name, &f.args, &f.identity, &f.result, &f.retType, &f.retSet, &f.strict,
				&f.volatility, &names, &modes, &nargs, &f.comment, &f.inputTypes, &f.grantees); err != nil {
				rows.Close()
				return err
			}
			for i, n := range names {
				if len(modes) == 0 && i < int(nargs) || len(modes) > i && strings.ContainsAny(modes[i], "ibv") {
					f.inputs = append(f.inputs, n)
				}
			}
			if len(f.inputs) != int(nargs) {
				rows.Close()
				return fmt.Errorf("function backoff.%s(%s): every input argument needs a name to be routed", f.name, f.identity)
			}
			c.functions = append(c.functions, f)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `
SELECT c.relname::text,
       ARRAY(SELECT quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod)
             FROM pg_attribute AS a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum),
       ARRAY(SELECT r.rolname::text FROM aclexplode(c.relacl) AS x JOIN pg_roles AS r ON r.oid = x.grantee
             WHERE x.privilege_type = 'SELECT' AND x.grantee <> c.relowner ORDER BY 1),
       c.relkind::text
FROM pg_class AS c
WHERE c.relnamespace = 'backoff'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'c') AND c.relname <> 'schema_migrations'
  AND NOT c.relispartition
ORDER BY c.relname`)
		if err != nil {
			return err
		}
		for rows.Next() {
			var t table
			var kind string
			if err := rows.Scan(&t.name, &t.columns, &t.grantees, &kind); err != nil {
				rows.Close()
				return err
			}
			if kind == "c" {
				c.types = append(c.types, fmt.Sprintf("CREATE TYPE backoff.%s AS (%s)", quoteIdent(t.name), strings.Join(t.columns, ", ")))
				continue
			}
			c.tables = append(c.tables, t)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		rows, err = tx.Query(ctx, `
SELECT format('CREATE TYPE backoff.%I AS ENUM (%s)', t.typname,
              (SELECT string_agg(quote_literal(e.enumlabel), ', ' ORDER BY e.enumsortorder) FROM pg_enum AS e WHERE e.enumtypid = t.oid))
FROM pg_type AS t WHERE t.typnamespace = 'backoff'::regnamespace AND t.typtype = 'e' ORDER BY t.typname`)
		if err != nil {
			return err
		}
		enums, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		c.types = append(enums, c.types...)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the shard's catalog: %w", err)
	}
	return c, nil
}

// diff names the first difference between two shards' catalogs ("" when
// they match).
func (c *catalog) diff(o *catalog) string {
	sig := func(cat *catalog) []string {
		var s []string
		for _, f := range cat.functions {
			s = append(s, "function backoff."+f.name+"("+f.args+") returns "+f.result)
		}
		for _, t := range cat.tables {
			s = append(s, "table backoff."+t.name+"("+strings.Join(t.columns, ", ")+")")
		}
		s = append(s, cat.types...)
		sort.Strings(s)
		return s
	}
	a, b := sig(c), sig(o)
	for i := 0; i < max(len(a), len(b)); i++ {
		switch {
		case i >= len(a):
			return "only the other shard has " + b[i]
		case i >= len(b):
			return "only shard 0 has " + a[i]
		case a[i] != b[i]:
			return a[i] + " versus " + b[i]
		}
	}
	return ""
}

func quoteIdent(s string) string { return pgx.Identifier{s}.Sanitize() }

// cluster is the CLUSTER statement of every generated PL/Proxy function:
// backoff._cluster() names the server after checking the caller.
const cluster = "CLUSTER backoff._cluster();"

// clusterSQL creates backoff._cluster(). PL/Proxy logs into a shard as
// current_user, so a login that SET ROLEs to another login role reaches
// the shards as that role, and a shard sees neither the login nor its
// queue scope (docs/adr/0038): the router refuses a call made under a role
// other than the login's own, unless the login is a superuser (who is never
// scoped, and may narrow itself to a role whose scope the shard then
// applies). See docs/adr/0056. Every name and operator is qualified
// instead of a SET search_path: a SET clause makes each call save and
// restore the setting, and PL/Proxy calls this once per forwarded call.
const clusterSQL = `CREATE FUNCTION backoff._cluster() RETURNS text
LANGUAGE plpgsql STABLE
AS $$
BEGIN
    IF session_user OPERATOR(pg_catalog.<>) current_user THEN
        IF NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname OPERATOR(pg_catalog.=) session_user), false) THEN
            RAISE EXCEPTION 'permission denied: login "%" acts as role "%", which the router does not forward', session_user, current_user
                USING ERRCODE = '42501',
                      HINT = 'RESET ROLE, or log in as the role: a shard checks the role it is reached as, and the queue scope of the login would be lost.';
        END IF;
    END IF;
    RETURN '` + ServerName + `';
END
$$`

// routerShardsSQL creates backoff.router_shards(): each shard's address
// (host, hostaddr, port, dbname) taken from its connection string in the
// SQL/MED server's options; any other keyword there (a password an
// operator added) is left out. The options are hidden from other roles
// (catalogSQL), so it is a definer function that reads them as the owner.
const routerShardsSQL = `CREATE FUNCTION backoff.router_shards(OUT shard integer, OUT conninfo text) RETURNS SETOF record
LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $$
    SELECT substr(split_part(o, '=', 1), 2)::integer,
           (SELECT string_agg(m[1] || '=' || m[2], ' ' ORDER BY x.i)
            FROM regexp_matches(substr(o, strpos(o, '=') + 1),
                                $re$([A-Za-z_]+)\s*=\s*('(?:[^'\\]|\\.)*'|[^\s']+)$re$, 'g') WITH ORDINALITY AS x(m, i)
            WHERE m[1] IN ('host', 'hostaddr', 'port', 'dbname'))
    FROM pg_catalog.pg_foreign_server AS s, unnest(s.srvoptions) AS o
    WHERE s.srvname = '` + ServerName + `' AND o ~ '^p[0-9]+='
    ORDER BY 1
$$`

// graphShardSQL creates backoff._graph_shard(jobs): the shard of a
// workflow (backoff.enqueue_graph's p_jobs), where the queues of its jobs
// and the existing jobs it depends on all live. A graph whose parts live on
// different shards is refused with 0A000, naming each queue and job with its
// shard: its edges are rows of one shard. What the shard itself would
// refuse (no array, no queue) goes to shard 0, which says why.
const graphShardSQL = `CREATE FUNCTION backoff._graph_shard(p_jobs jsonb) RETURNS integer
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_shards integer[];
    v_parts  text;
BEGIN
    IF p_jobs IS NULL OR jsonb_typeof(p_jobs) <> 'array' THEN
        RETURN 0;
    END IF;
    WITH part AS (
        SELECT format('queue "%s" on shard %s', q.queue, backoff._queue_shard(q.queue)) AS what,
               backoff._queue_shard(q.queue) AS shard, 0 AS kind
        FROM (SELECT DISTINCT j ->> 'queue' AS queue
              FROM jsonb_array_elements(p_jobs) AS j
              WHERE jsonb_typeof(j -> 'queue') = 'string') AS q
        UNION
        SELECT format('job %s on shard %s', x.id, backoff._job_shard(x.id)), backoff._job_shard(x.id), 1
        FROM jsonb_array_elements(p_jobs) AS j
        CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(j -> 'depends_on') = 'array' THEN j -> 'depends_on' ELSE '[]' END) AS d
        CROSS JOIN LATERAL (SELECT CASE WHEN jsonb_typeof(d) = 'number' THEN d #>> '{}'
                                        WHEN jsonb_typeof(d -> 'job') = 'number' THEN d ->> 'job' END) AS t(id)
        CROSS JOIN LATERAL (SELECT t.id::bigint WHERE t.id ~ '^[0-9]{1,18}$') AS x(id)
    )
    SELECT array_agg(DISTINCT p.shard), string_agg(p.what, ', ' ORDER BY p.kind, p.what)
    INTO v_shards, v_parts
    FROM part AS p;
    IF cardinality(v_shards) > 1 THEN
        RAISE EXCEPTION 'enqueue_graph: the graph spans shards (%): through the router, its queues and the jobs it depends on must live on one shard', v_parts
            USING ERRCODE = 'feature_not_supported',
                  HINT = 'Place the graph''s queues on one shard before their first jobs (backoffctl shards placement QUEUE --shard K), or enqueue the parts as separate graphs.';
    END IF;
    RETURN coalesce(v_shards[1], 0);
END
$$`

// catalogSQL hides the SQL/MED server's options (the shards' connection
// strings, where an operator may have put a password) from every role but
// the owner's: pg_foreign_server and information_schema show a server's
// options to every role with USAGE on it, which every router caller needs
// for PL/Proxy. PL/Proxy reads them from the system cache, unaffected.
// Only a superuser may change a catalog's privileges; a non-superuser's
// REVOKE would only warn, so it is refused instead.
const catalogSQL = `DO $$
DECLARE
    v_cols text;
BEGIN
    IF NOT coalesce((SELECT r.rolsuper FROM pg_catalog.pg_roles AS r WHERE r.rolname = current_user), false) THEN
        RAISE EXCEPTION 'install router: role "%" is not a superuser: only a superuser can hide the shards'' connection strings from the router''s callers', current_user
            USING ERRCODE = '42501';
    END IF;
    SELECT pg_catalog.string_agg(pg_catalog.quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO v_cols
    FROM pg_catalog.pg_attribute AS a
    WHERE a.attrelid = 'pg_catalog.pg_foreign_server'::pg_catalog.regclass AND a.attnum > 0
      AND NOT a.attisdropped AND a.attname <> 'srvoptions';
    REVOKE SELECT ON pg_catalog.pg_foreign_server FROM PUBLIC;
    EXECUTE pg_catalog.format('GRANT SELECT (%s) ON pg_catalog.pg_foreign_server TO PUBLIC', v_cols);
    GRANT SELECT (srvoptions) ON pg_catalog.pg_foreign_server TO backoff_owner;
    REVOKE SELECT ON information_schema.foreign_server_options FROM PUBLIC;
END
$$`

// Unrouted lists the public functions of the catalog that no rule routes
// (name(identity arguments)).
func (c *catalog) unrouted() []string {
	var out []string
	for _, f := range c.functions {
		if _, err := ruleFor(f); err != nil {
			out = append(out, fmt.Sprintf("backoff.%s(%s)", f.name, f.identity))
		}
	}
	return out
}

// ruleFor picks the rule of an overload: the first of its name's rules
// whose arguments it has.
func ruleFor(f function) (Rule, error) {
	rules, ok := Rules[f.name]
	if !ok {
		return Rule{}, fmt.Errorf("backoff.%s(%s) has no routing rule: add one to internal/router/rules.go", f.name, f.identity)
	}
	for _, r := range rules {
		want := append([]string{r.Arg}, r.Split...)
		if r.Create != "" {
			want = append(want, r.Create)
		}
		if r.Arg == "" || hasAll(f.inputs, want) {
			return r, nil
		}
	}
	return Rule{}, fmt.Errorf("backoff.%s(%s): no rule of %q matches its arguments: add one to internal/router/rules.go", f.name, f.identity, f.name)
}

func hasAll(have, want []string) bool {
	for _, w := range want {
		found := false
		for _, h := range have {
			found = found || h == w
		}
		if !found {
			return false
		}
	}
	return true
}

// routerSQL generates the router's helper functions, layout, views and
// forwarding functions for the layout l.
func (c *catalog) routerSQL(l Layout) ([]string, error) {
	var errs []error
	placement, err := layoutSQL(l)
	if err != nil {
		return nil, err
	}
	out := []string{
		// The hash rule of the queues not placed, frozen at the shard
		// count of the first install (docs/adr/0091-placement-table.md).
		fmt.Sprintf(`CREATE FUNCTION backoff._hash_shard(p_queue text) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(((('x' OPERATOR(pg_catalog.||) pg_catalog.substr(pg_catalog.md5(p_queue), 1, 8))::pg_catalog.bit(32)::pg_catalog.int4
    OPERATOR(pg_catalog.&) 2147483647) OPERATOR(pg_catalog.%%) %d), 0)`, l.HashShards),
		fmt.Sprintf(`CREATE FUNCTION backoff._job_shard(p_job_id bigint) RETURNS integer
LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN coalesce(CASE WHEN p_job_id OPERATOR(pg_catalog.>) 0 THEN (p_job_id OPERATOR(pg_catalog.>>) %d)::pg_catalog.int4 ELSE 0 END, 0)`, ShardBits),
		graphShardSQL,
		clusterSQL,
		catalogSQL,
		routerShardsSQL,
	}
	out = append(out, placement...)
	out = append(out,
		`COMMENT ON FUNCTION backoff.router_shards() IS 'Router only (admins, producers and workers): the shards behind this router, by number, with each one''s address (host, port, dbname) from the connection string PL/Proxy uses; no user, password or other setting.'`,
		`CREATE FUNCTION backoff.router_queue_shard(p_queue text) RETURNS integer
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp
RETURN backoff._queue_shard(p_queue)`,
		`COMMENT ON FUNCTION backoff.router_queue_shard(text) IS 'Router only: the shard number that holds a queue, by its placement or else the hash rule (enqueue in your own transaction needs a connection to it).'`,
		`ALTER FUNCTION backoff.router_shards() OWNER TO backoff_owner`,
		`REVOKE ALL ON FUNCTION backoff.router_shards(), backoff.router_queue_shard(text), backoff._queue_shard(text), backoff._hash_shard(text), backoff._graph_shard(jsonb), backoff._job_shard(bigint), backoff._cluster() FROM PUBLIC`,
		// Producers need their queue's shard to enqueue in their own
		// transaction (client/sharding), workers in direct mode the shards
		// of their queues and jobs (docs/adr/0093), admins every shard for
		// the configuration commands. Addresses only: host, port, dbname.
		`GRANT EXECUTE ON FUNCTION backoff.router_shards() TO backoff_producer, backoff_worker, backoff_admin`,
		`GRANT EXECUTE ON FUNCTION backoff.router_queue_shard(text), backoff._queue_shard(text) TO backoff_producer, backoff_worker, backoff_admin`,
		`GRANT EXECUTE ON FUNCTION backoff._queue_shard(text), backoff._hash_shard(text), backoff._graph_shard(jsonb), backoff._job_shard(bigint), backoff._cluster() TO backoff_owner, backoff_producer, backoff_worker, backoff_admin`,
	)
	out = append(out, c.types...)
	// Views over the tables: their row types are the composite types the
	// functions return (backoff.jobs).
	for _, t := range c.tables {
		kind, ok := Tables[t.name]
		if !ok {
			errs = append(errs, fmt.Errorf("table backoff.%s has no routing rule: add it to Tables in internal/router/rules.go", t.name))
			continue
		}
		run := "RUN ON ALL;"
		if kind == TableReplicated {
			run = "RUN ON 0;"
		}
		var cols []string
		for _, col := range t.columns {
			cols = append(cols, "t."+strings.SplitN(col, " ", 2)[0])
		}
		fn := "backoff._table_" + t.name
		out = append(out,
			fmt.Sprintf("CREATE FUNCTION %s() RETURNS TABLE (%s) LANGUAGE plproxy VOLATILE AS $p$\n%s\n%s\nSELECT %s FROM backoff.%s AS t;\n$p$",
				fn, strings.Join(t.columns, ", "), cluster, run, strings.Join(cols, ", "), quoteIdent(t.name)),
			fmt.Sprintf("CREATE VIEW backoff.%s AS SELECT * FROM %s()", quoteIdent(t.name), fn),
			fmt.Sprintf("ALTER FUNCTION %s() OWNER TO backoff_owner", fn),
			fmt.Sprintf("ALTER VIEW backoff.%s OWNER TO backoff_owner", quoteIdent(t.name)),
			fmt.Sprintf("REVOKE ALL ON FUNCTION %s() FROM PUBLIC", fn),
			fmt.Sprintf("COMMENT ON VIEW backoff.%s IS %s", quoteIdent(t.name), literal(fmt.Sprintf(
				"Router: backoff.%s of %s, read through PL/Proxy (read-only; every read fetches the whole table).", t.name,
				map[TableKind]string{TableAll: "every shard", TableReplicated: "shard 0 (the same on every shard)"}[kind]))),
		)
		for _, g := range t.grantees {
			out = append(out,
				fmt.Sprintf("GRANT SELECT ON backoff.%s TO %s", quoteIdent(t.name), quoteIdent(g)),
				fmt.Sprintf("GRANT EXECUTE ON FUNCTION %s() TO %s", fn, quoteIdent(g)))
		}
	}
	for _, f := range c.functions {
		r, err := ruleFor(f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, forward(f, r)...)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// typeOf is the type of input argument name.
func (f function) typeOf(name string) string {
	for i, n := range f.inputs {
		if n == name && i < len(f.inputTypes) {
			return f.inputTypes[i]
		}
	}
	return ""
}

func literal(s string) string { return "'" + quoteLit(s) + "'" }

// forward is the SQL that creates the router's function for f.
func forward(f function, r Rule) []string {
	sig := fmt.Sprintf("backoff.%s(%s)", quoteIdent(f.name), f.identity)
	// PL/Proxy functions must be VOLATILE; so are their wrappers (a call
	// reaches another server whatever the shard's function is).
	attrs := "VOLATILE"
	if f.strict {
		attrs += " STRICT"
	}
	var out []string
	plproxy := func(name, args, result, body string) string {
		return fmt.Sprintf("CREATE FUNCTION %s(%s) RETURNS %s LANGUAGE plproxy %s AS $p$\n%s\n%s\n$p$",
			name, args, result, attrs, cluster, body)
	}
	// internal is a PL/Proxy function backoff._route_NAME with f's input
	// arguments (no defaults) and a set result, which the public wrapper
	// calls; it runs backoff.NAME on the shards.
	internal := func(run string) string {
		return plproxy("backoff._route_"+f.name, f.identity, "SETOF "+f.retType, run+"\nTARGET backoff."+f.name+";")
	}
	call := "backoff._route_" + f.name + "(" + strings.Join(f.inputs, ", ") + ")"
	wrapper := func(lang, body string) string {
		return fmt.Sprintf("CREATE FUNCTION backoff.%s(%s) RETURNS %s LANGUAGE %s %s SET search_path = pg_catalog, pg_temp AS $w$\n%s\n$w$",
			quoteIdent(f.name), f.args, f.result, lang, attrs, body)
	}
	switch r.Kind {
	case ByQueue:
		out = append(out, plproxy("backoff."+quoteIdent(f.name), f.args, f.result, "RUN ON backoff._queue_shard("+r.Arg+");"))
	case ByJob:
		out = append(out, plproxy("backoff."+quoteIdent(f.name), f.args, f.result, "RUN ON backoff._job_shard("+r.Arg+");"))
	case ByGraph:
		out = append(out, plproxy("backoff."+quoteIdent(f.name), f.args, f.result, "RUN ON backoff._graph_shard("+r.Arg+");"))
	case ByJobSplit:
		// PL/Proxy splits a NULL array as an empty one, which then fails
		// its check of equal lengths: a NULL array beside the ids (an
		// omitted p_outputs) is passed as an array of NULLs, one per id.
		args := make([]string, len(f.inputs))
		for i, in := range f.inputs {
			args[i] = in
			if in != r.Arg && slices.Contains(r.Split, in) {
				args[i] = fmt.Sprintf("coalesce(%[1]s, array_fill(NULL::%[2]s, ARRAY[coalesce(cardinality(%[3]s), 0)]))",
					in, strings.TrimSuffix(f.typeOf(in), "[]"), r.Arg)
			}
		}
		out = append(out, internal("SPLIT "+strings.Join(r.Split, ", ")+";\nRUN ON backoff._job_shard("+r.Arg+");"),
			wrapper("sql", "SELECT * FROM backoff._route_"+f.name+"("+strings.Join(args, ", ")+")"))
	case AllUnion:
		out = append(out, plproxy("backoff."+quoteIdent(f.name), f.args, f.result, "RUN ON ALL;"))
	case Any:
		out = append(out, plproxy("backoff."+quoteIdent(f.name), f.args, f.result, "RUN ON ANY;"))
	case AllOr:
		if r.Create == "" {
			out = append(out, internal("RUN ON ALL;"), wrapper("sql", fmt.Sprintf("SELECT bool_or(r)::%s FROM %s AS r", f.retType, call)))
			break
		}
		created := make([]string, len(f.inputs))
		for i, in := range f.inputs {
			created[i] = in
			if in == r.Create {
				created[i] = "true"
			}
		}
		home := "backoff._route1_" + f.name + "(" + strings.Join(f.inputs, ", ") + ")"
		everywhere := "backoff._route_" + f.name + "(" + strings.Join(created, ", ") + ")"
		out = append(out, internal("RUN ON ALL;"),
			plproxy("backoff._route1_"+f.name, f.identity, "SETOF "+f.retType, "RUN ON backoff._queue_shard("+r.Arg+");\nTARGET backoff."+f.name+";"),
			wrapper("plpgsql", fmt.Sprintf(`DECLARE
    v_home %[1]s;
    v_all  %[1]s;
BEGIN
    -- The queue's shard decides whether the queue exists; then every
    -- shard gets the row (created where missing). Two statements: an OR
    -- of both calls could skip the second.
    v_home := (SELECT bool_or(r) FROM %[2]s AS r);
    v_all := (SELECT bool_or(r) FROM %[3]s AS r);
    RETURN coalesce(v_all, false) OR coalesce(v_home, false);
END`, f.retType, home, everywhere)))
	case AllSum, AllMin:
		agg := map[Kind]string{AllSum: "sum", AllMin: "min"}[r.Kind]
		out = append(out, internal("RUN ON ALL;"),
			wrapper("sql", fmt.Sprintf("SELECT %s(r)::%s FROM %s AS r", agg, f.retType, call)))
	case ByQueueSplit:
		// The shards answer with the ids of their elements in input order;
		// an id carries its shard, so the answers are put back in the
		// order of the input by taking, for element i, the next id of
		// element i's shard.
		// A call the shard refuses (no queues, arrays of other lengths)
		// goes whole to shard 0, which raises its own error; a NULL array
		// means all NULL, so it is split as an array of NULLs.
		var check, fill []string
		for _, a := range r.Split {
			typ := strings.TrimSuffix(f.typeOf(a), "[]")
			check = append(check, fmt.Sprintf("coalesce(cardinality(%[1]s), v_n) <> v_n", a))
			fill = append(fill, fmt.Sprintf("    %[1]s := coalesce(%[1]s, array_fill(NULL::%[2]s, ARRAY[v_n]));", a, typ))
		}
		call0 := "backoff._route0_" + f.name + "(" + strings.Join(f.inputs, ", ") + ")"
		out = append(out, internal("SPLIT "+strings.Join(r.Split, ", ")+";\nRUN ON backoff._queue_shard("+r.Arg+");"),
			plproxy("backoff._route0_"+f.name, f.identity, "SETOF "+f.retType, "RUN ON 0;\nTARGET backoff."+f.name+";"),
			wrapper("plpgsql", fmt.Sprintf(`DECLARE
    v_ids bigint[];
    v_n   integer := coalesce(cardinality(%[1]s), 0);
BEGIN
    IF %[1]s IS NULL OR v_n = 0 OR %[3]s THEN
        RETURN QUERY SELECT * FROM %[4]s;
        RETURN;
    END IF;
%[5]s
    v_ids := ARRAY(SELECT r FROM %[2]s AS r);
    IF cardinality(v_ids) <> coalesce(cardinality(%[1]s), 0) THEN
        RAISE EXCEPTION 'router: the shards returned %% ids for %% elements', cardinality(v_ids), cardinality(%[1]s);
    END IF;
    RETURN QUERY
    WITH e AS (
        SELECT x.i, backoff._queue_shard(x.q) AS s,
               row_number() OVER (PARTITION BY backoff._queue_shard(x.q) ORDER BY x.i) AS rn
        FROM unnest(%[1]s) WITH ORDINALITY AS x(q, i)
    ), r AS (
        SELECT y.id, backoff._job_shard(y.id) AS s,
               row_number() OVER (PARTITION BY backoff._job_shard(y.id) ORDER BY y.o) AS rn
        FROM unnest(v_ids) WITH ORDINALITY AS y(id, o)
    )
    SELECT r.id FROM e JOIN r ON r.s = e.s AND r.rn = e.rn ORDER BY e.i;
END`, r.Arg, call, strings.Join(check, " OR "), call0, strings.Join(fill, "\n"))))
	}
	out = append(out, "ALTER FUNCTION "+sig+" OWNER TO backoff_owner", "REVOKE ALL ON FUNCTION "+sig+" FROM PUBLIC")
	if r.Kind == AllSum || r.Kind == AllMin || r.Kind == AllOr || r.Kind == ByQueueSplit || r.Kind == ByJobSplit {
		for _, prefix := range []string{"_route_", "_route0_", "_route1_"} {
			if (prefix == "_route0_" && r.Kind != ByQueueSplit) || (prefix == "_route1_" && r.Create == "") {
				continue
			}
			isig := fmt.Sprintf("backoff.%s%s(%s)", prefix, f.name, f.identity)
			out = append(out, "ALTER FUNCTION "+isig+" OWNER TO backoff_owner", "REVOKE ALL ON FUNCTION "+isig+" FROM PUBLIC")
			for _, g := range f.grantees {
				out = append(out, fmt.Sprintf("GRANT EXECUTE ON FUNCTION %s TO %s", isig, quoteIdent(g)))
			}
		}
	}
	for _, g := range f.grantees {
		out = append(out, fmt.Sprintf("GRANT EXECUTE ON FUNCTION %s TO %s", sig, quoteIdent(g)))
	}
	if f.comment != nil {
		out = append(out, fmt.Sprintf("COMMENT ON FUNCTION %s IS %s", sig, literal(*f.comment)))
	}
	return out
}
