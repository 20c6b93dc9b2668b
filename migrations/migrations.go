// Package migrations installs and upgrades pgbackoff's schema (backoff) from
// Go: the numbered SQL migrations are embedded in this package, so a
// program that imports it migrates its database at start-up, or in its own
// deploy tool, without backoffctl:
//
//	conn, err := pgx.Connect(ctx, os.Getenv("DATABASE_URL"))
//	m, err := migrations.New(ctx, conn)
//	from, to, err := m.MigrateTo(ctx, migrations.Latest())
//
// It is what `backoffctl migrate` runs. Concurrent migrators (several
// instances of a program starting at once) are serialised by an advisory
// lock; a database already at the target is left alone. Every statement
// runs with search_path = pg_catalog (docs/adr/0036-install-hygiene.md),
// and a login that is not a superuser needs membership in backoff_owner
// (README, "Privileges of the installing login"); the error says so.
package migrations

import (
	"context"

	"github.com/jackc/pgx/v5"

	imig "github.com/pgbackoff/pgbackoff/internal/migrations"
	"github.com/pgbackoff/pgbackoff/internal/router"
)

// Latest is the highest migration version this build of the library
// ships: the version client.New expects.
func Latest() int32 { return imig.Latest() }

// Migration is one numbered migration and whether the database has it.
type Migration struct {
	Version int32
	Name    string
	Applied bool
}

// Status is where a database stands: its version, Latest, and every
// migration.
type Status struct {
	Current    int32
	Latest     int32
	Migrations []Migration
}

// Migrator applies the embedded migrations over one connection.
type Migrator struct {
	m *imig.Migrator
}

// New prepares a migrator on conn: it creates the schema backoff and its
// version table (backoff.schema_migrations) if they do not exist yet, and
// leaves conn's search_path as it found it.
func New(ctx context.Context, conn *pgx.Conn) (*Migrator, error) {
	m, err := imig.New(ctx, conn)
	if err != nil {
		return nil, err
	}
	return &Migrator{m: m}, nil
}

// Latest is the highest version this migrator knows (the package's Latest).
func (m *Migrator) Latest() int32 { return m.m.Latest() }

// Current is the version the database is at (0: nothing installed).
func (m *Migrator) Current(ctx context.Context) (int32, error) { return m.m.Current(ctx) }

// MigrateTo moves the database up or down to version target, each
// migration in a transaction of its own, and returns the versions it went
// from and to. 0 removes every table and function of the schema (the
// schema and its version table stay); a target outside 0..Latest is an
// error and changes nothing.
func (m *Migrator) MigrateTo(ctx context.Context, target int32) (from, to int32, err error) {
	return m.m.MigrateTo(ctx, target)
}

// Status lists every migration and whether the database has it.
func (m *Migrator) Status(ctx context.Context) (Status, error) {
	st, err := m.m.Status(ctx)
	if err != nil {
		return Status{}, err
	}
	out := Status{Current: st.Current, Latest: st.Latest, Migrations: make([]Migration, len(st.Migrations))}
	for i, x := range st.Migrations {
		out.Migrations[i] = Migration{Version: x.Version, Name: x.Name, Applied: x.Applied}
	}
	return out, nil
}

// InstallRouter migrates every shard (shardURLs, in shard order) to Latest,
// gives each its range of job ids, and (re)creates the PL/Proxy router
// schema in the database of conn, generated from the shards' catalog
// (docs/sharding.md). It is `backoffctl migrate up --router`. conn's login
// must be a superuser; a database that holds a pgbackoff schema itself is
// refused as a router.
func InstallRouter(ctx context.Context, conn *pgx.Conn, shardURLs []string) error {
	shards := make([]router.Shard, len(shardURLs))
	for i, u := range shardURLs {
		shards[i] = router.Shard{URL: u}
	}
	return router.Install(ctx, conn, shards)
}

// AddRouterShard registers the shard database of shardURL behind the
// router installed in the database of conn, moving no queue: the shard is
// migrated to Latest and given the next range of job ids, and the router is
// regenerated over its shards and the new one, keeping its layout (queues
// not placed keep the hash rule of the first install; placed queues stay).
// The registered shards are reached at the addresses the router lists with
// base's user, password and TLS settings. It is `backoffctl shards add`,
// and returns the new shard's number.
func AddRouterShard(ctx context.Context, conn *pgx.Conn, base *pgx.ConnConfig, shardURL string) (int, error) {
	return router.AddShard(ctx, conn, base, router.Shard{URL: shardURL})
}

// MoveOptions tunes MoveRouterQueue (router.MoveOptions): Abort, the batch
// size, how long to wait for running jobs, and a hook told each step.
type MoveOptions = router.MoveOptions

// MoveResult says what a run of MoveRouterQueue did.
type MoveResult = router.MoveResult

// ErrMoveWaiting is returned (wrapped) by MoveRouterQueue when its wait for
// the old shard's running jobs or transactions in flight outlasts
// MoveOptions.Wait; running the move again goes on from there.
var ErrMoveWaiting = router.ErrMoveWaiting

// MoveRouterQueue moves queue, with its waiting jobs, dead letters,
// schedules and the state of its controls, to shard to behind the router
// in the database of conn, while producers and workers go on through the
// router (docs/adr/0092-moving-a-live-queue.md). The shards are reached at
// the addresses the router lists with base's user, password and TLS
// settings. It is resumable: run it again after any failure. With
// opts.Abort it moves a queue whose move is under way back. It is
// `backoffctl shards move`.
func MoveRouterQueue(ctx context.Context, conn *pgx.Conn, base *pgx.ConnConfig, queue string, to int, opts MoveOptions) (MoveResult, error) {
	return router.MoveQueue(ctx, conn, base, queue, to, opts)
}
