// Package migrations applies pgbackoff's embedded SQL migrations with tern.
//
// The migration files live in sql/migrations; a migration that installs
// functions does so with tern's install_snapshot, which reads a frozen copy
// of the function files (sql/migrations/snapshots/NNN) or, for the migration
// under development, the working copy in sql/functions, exposed here as the
// snapshot named "unreleased".
package migrations

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/tern/v2/migrate"

	sqlfiles "github.com/pgbackoff/pgbackoff/sql"
)

// VersionTable is tern's bookkeeping table; it lives inside the backoff
// schema so that an installation is one schema and nothing else.
const VersionTable = "backoff.schema_migrations"

// PinSearchPath is the statement every install route runs first
// (docs/adr/0036-install-hygiene.md): with only pg_catalog on the
// search_path, no unqualified name in the install SQL (a CHECK constraint,
// a default, a down section) can resolve to a look-alike function or
// operator that someone planted in a schema the installer happens to
// search, such as public. The migrator runs it as SET LOCAL at the start of
// each migration's transaction; dist/backoff.sql and the extension script
// start with it.
const PinSearchPath = "SET search_path = pg_catalog"

// Migration is one numbered migration and whether the database has it.
type Migration struct {
	Version int32
	Name    string
	Applied bool
}

// Status is where a database stands.
type Status struct {
	Current    int32
	Latest     int32
	Migrations []Migration
}

// Source returns the file tree tern loads: the numbered migrations at the
// root, released snapshots under snapshots/, and sql/functions as
// snapshots/unreleased.
func Source() (fs.FS, error) {
	tree := fstest.MapFS{}
	add := func(root, prefix string) error {
		return fs.WalkDir(sqlfiles.Files, root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			body, err := fs.ReadFile(sqlfiles.Files, path)
			if err != nil {
				return err
			}
			tree[prefix+strings.TrimPrefix(path, root+"/")] = &fstest.MapFile{Data: body, Mode: 0o444}
			return nil
		})
	}
	if err := add("migrations", ""); err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	if err := add("functions", "snapshots/unreleased/"); err != nil {
		return nil, fmt.Errorf("read embedded functions: %w", err)
	}
	return tree, nil
}

// Load parses every migration without a database, for tools that render
// the SQL (dist/backoff.sql, the extension script) and for tests.
func Load() ([]*migrate.Migration, error) {
	m, err := migrate.NewMigratorEx(context.Background(), nil, VersionTable, &migrate.MigratorOptions{})
	if err != nil {
		return nil, err
	}
	if err := load(m); err != nil {
		return nil, err
	}
	return m.Migrations, nil
}

func load(m *migrate.Migrator) error {
	src, err := Source()
	if err != nil {
		return err
	}
	if err := m.LoadMigrations(src); err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	return nil
}

// Latest is the highest migration version this build ships.
func Latest() int32 {
	ms, err := Load()
	if err != nil {
		// The migrations are embedded at build time; failing to parse them is a
		// build defect that the migration tests catch.
		panic(err)
	}
	return int32(len(ms))
}

// Migrator applies migrations over one connection. tern serialises
// concurrent migrators with an advisory lock.
type Migrator struct {
	conn *pgx.Conn
	tern *migrate.Migrator
}

// New prepares a migrator: it creates the backoff schema and the version
// table if they do not exist yet.
//
// Everything it and MigrateTo send runs with search_path = pg_catalog
// (PinSearchPath): each migration sets it for its own transaction (tern
// resets the session after each one), and the preparation here sets it for
// the session and restores the caller's search_path afterwards.
func New(ctx context.Context, conn *pgx.Conn) (m *Migrator, err error) {
	var saved string
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.current_setting('search_path')").Scan(&saved); err != nil {
		return nil, fmt.Errorf("read search_path: %w", err)
	}
	if _, err := conn.Exec(ctx, PinSearchPath); err != nil {
		return nil, fmt.Errorf("pin search_path: %w", err)
	}
	defer func() {
		if _, rerr := conn.Exec(ctx, "SELECT pg_catalog.set_config('search_path', $1, false)", saved); rerr != nil && err == nil {
			err = fmt.Errorf("restore search_path: %w", rerr)
		}
	}()
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS backoff"); err != nil {
		return nil, fmt.Errorf("create schema backoff: %w", err)
	}
	tm, err := migrate.NewMigrator(ctx, conn, VersionTable)
	if err != nil {
		return nil, fmt.Errorf("prepare version table %s: %w", VersionTable, err)
	}
	if err := load(tm); err != nil {
		return nil, err
	}
	for _, mig := range tm.Migrations {
		// tern runs each migration in a transaction of its own, so SET LOCAL
		// holds for exactly that migration, up or down.
		mig.UpSQL = pinned(mig.UpSQL)
		mig.DownSQL = pinned(mig.DownSQL)
	}
	return &Migrator{conn: conn, tern: tm}, nil
}

// pinned prefixes a migration's SQL with PinSearchPath for its transaction.
func pinned(sql string) string {
	if sql == "" {
		return sql
	}
	return "SET LOCAL" + strings.TrimPrefix(PinSearchPath, "SET") + ";\n" + sql
}

// Latest is the highest version this migrator knows.
func (m *Migrator) Latest() int32 { return int32(len(m.tern.Migrations)) }

// Current is the version the database is at.
func (m *Migrator) Current(ctx context.Context) (int32, error) {
	v, err := m.tern.GetCurrentVersion(ctx)
	if err != nil {
		return 0, fmt.Errorf("read schema version: %w", err)
	}
	return v, nil
}

// MigrateTo moves the database to target (0 removes everything but the
// schema and its version table) and returns the versions it went from and to.
func (m *Migrator) MigrateTo(ctx context.Context, target int32) (from, to int32, err error) {
	if target < 0 || target > m.Latest() {
		return 0, 0, fmt.Errorf("target version %d is out of range 0..%d", target, m.Latest())
	}
	from, err = m.Current(ctx)
	if err != nil {
		return 0, 0, err
	}
	if err := m.tern.MigrateTo(ctx, target); err != nil {
		return from, 0, fmt.Errorf("migrate from version %d to %d: %w", from, target, err)
	}
	to, err = m.Current(ctx)
	return from, to, err
}

// Status lists every migration and whether it is applied.
func (m *Migrator) Status(ctx context.Context) (Status, error) {
	cur, err := m.Current(ctx)
	if err != nil {
		return Status{}, err
	}
	st := Status{Current: cur, Latest: m.Latest()}
	for _, mig := range m.tern.Migrations {
		st.Migrations = append(st.Migrations, Migration{Version: mig.Sequence, Name: mig.Name, Applied: mig.Sequence <= cur})
	}
	return st, nil
}
