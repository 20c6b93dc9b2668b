// Package distribution renders pgbackoff's migrations into files for users
// who install the SQL without Go: dist/backoff.sql (run it with psql), the
// one committed install file, and the PostgreSQL extension script
// extension/backoff--VERSION.sql, which is not committed: `make
// install-extension` derives it from dist/backoff.sql with
// scripts/extension-script.sh (docs/adr/0031-one-install-file.md).
//
// Both are generated from the embedded migrations, so they cannot drift
// from what `backoffctl migrate up` installs; tests compare the committed
// files with a fresh rendering and the installed schemas with each other.
package distribution

import (
	"fmt"
	"strings"

	"github.com/pgbackoff/pgbackoff"
	"github.com/pgbackoff/pgbackoff/internal/migrations"
	sqlfiles "github.com/pgbackoff/pgbackoff/sql"
)

// ExtensionVersion is the version in backoff.control and in the name of
// the extension script: the release version.
const ExtensionVersion = pgbackoff.Version

// Target selects what the rendering is for.
type Target int

const (
	// Standalone is dist/backoff.sql: creates the schema itself and runs in
	// one transaction under psql.
	Standalone Target = iota
	// Extension is the CREATE EXTENSION script: the schema comes from
	// backoff.control, and psql must not run it directly.
	Extension
)

// Render returns the SQL that installs every migration up to the latest,
// and records that version in backoff.schema_migrations so that
// `backoffctl migrate` and backoff.schema_version() work afterwards.
func Render(target Target) (string, error) {
	ms, err := migrations.Load()
	if err != nil {
		return "", err
	}
	var b strings.Builder
	switch target {
	case Standalone:
		b.WriteString("-- pgbackoff " + pgbackoff.Version + ": the whole SQL in one file, generated from sql/migrations.\n")
		b.WriteString("-- Install: psql -v ON_ERROR_STOP=1 -1 -f dist/backoff.sql \"$DATABASE_URL\"\n")
		b.WriteString("-- Do not edit: run `make generate` after changing sql/.\n")
		b.WriteString("-- Sources: sha256 " + sqlfiles.Digest() + "\n\n")
		b.WriteString("CREATE SCHEMA backoff;\n\n")
	case Extension:
		b.WriteString("-- pgbackoff extension script, generated from sql/migrations.\n")
		b.WriteString("-- Do not edit: run `make generate` after changing sql/.\n")
		b.WriteString("\\echo Use \"CREATE EXTENSION backoff\" to load this file. \\quit\n\n")
	default:
		return "", fmt.Errorf("unknown target %d", target)
	}
	// Every name resolves in pg_catalog, never in a schema others may create
	// in (docs/adr/0036-install-hygiene.md). psql runs the standalone file
	// in a session of its own. The extension script needs no SET (which
	// would outlive CREATE EXTENSION in the caller's session): while it runs,
	// PostgreSQL sets search_path to the extension's schema alone, backoff,
	// with pg_catalog searched first.
	if target == Standalone {
		fmt.Fprintf(&b, "%s;\n\n", migrations.PinSearchPath)
	}
	fmt.Fprintf(&b, "CREATE TABLE %s (version int4 NOT NULL);\n", migrations.VersionTable)
	fmt.Fprintf(&b, "INSERT INTO %s (version) VALUES (%d);\n", migrations.VersionTable, len(ms))
	for _, m := range ms {
		fmt.Fprintf(&b, "\n-- ===== migration %d: %s =====\n\n%s\n", m.Sequence, m.Name, strings.TrimSpace(m.UpSQL))
	}
	return b.String(), nil
}

// Control is the content of extension/backoff.control.
func Control() string {
	return `# pgbackoff: retries, backoff and job claiming in PostgreSQL
comment = 'pgbackoff: retries, backoff and job claiming in PostgreSQL'
default_version = '` + ExtensionVersion + `'
schema = backoff
relocatable = false
trusted = false
`
}

// ExtensionFiles are the files CREATE EXTENSION backoff needs in the
// server's extension directory, by name: what make install-extension
// installs, rendered from this tree. The tests put them into the servers
// they start (pgserver's InstallExtensionFiles; cmd/pgcontainer of
// internal/containers).
func ExtensionFiles() (map[string][]byte, error) {
	script, err := Render(Extension)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{
		"backoff.control":                       []byte(Control()),
		"backoff--" + ExtensionVersion + ".sql": []byte(script),
	}, nil
}
