package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"runtime/debug"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/spf13/cobra"

	"github.com/pgbackoff/pgbackoff"
	"github.com/pgbackoff/pgbackoff/migrations"
)

func init() { register(newVersionCommand) }

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the versions of backoffctl, the library, the schema and the database's schema",
		Long: `Print the version of backoffctl, of the pgbackoff library it was built
with, and of the schema it installs (the number of its latest migration,
what backoff.schema_version() returns after "migrate up"). Given a database
(--database-url, or DATABASE_URL), it also reads that database's schema
version with backoff.schema_version(); without one it does not connect.`,
		Example: `  backoffctl version
  backoffctl version --database-url postgres://app@db/app
  backoffctl version --output json`,
		Args: exactArgs(0, ""),
		RunE: withOutput(func(cmd *cobra.Command, _ []string, jsonOut bool) error {
			v := versions{
				CLI:     cliVersion(debug.ReadBuildInfo()),
				Library: pgbackoff.Version,
				Schema:  migrations.Latest(),
			}
			if _, err := databaseURL(cmd); err == nil {
				err := withConn(cmd, func(ctx context.Context, conn *pgx.Conn) error {
					db, err := databaseSchemaVersion(ctx, conn)
					v.Database = &db
					return err
				})
				if err != nil {
					return err
				}
			}
			if jsonOut {
				return writeJSON(cmd.OutOrStdout(), v)
			}
			writeVersions(cmd.OutOrStdout(), v)
			return nil
		}),
	}
}

// versions is what backoffctl version prints.
type versions struct {
	CLI      string `json:"backoffctl"`
	Library  string `json:"library"`
	Schema   int32  `json:"schema"`
	Database *int32 `json:"database,omitempty"` // nil: no database given
}

func writeVersions(w io.Writer, v versions) {
	fmt.Fprintf(w, "backoffctl  %s\n", v.CLI)
	fmt.Fprintf(w, "library     %s\n", v.Library)
	fmt.Fprintf(w, "schema      %d\n", v.Schema)
	if v.Database == nil {
		return
	}
	db := *v.Database
	switch {
	case db == 0:
		fmt.Fprintf(w, "database    0 (not installed; migrate up installs %d)\n", v.Schema)
	case db < v.Schema:
		fmt.Fprintf(w, "database    %d (migrate up moves it to %d)\n", db, v.Schema)
	case db > v.Schema:
		fmt.Fprintf(w, "database    %d (newer than this backoffctl's %d)\n", db, v.Schema)
	default:
		fmt.Fprintf(w, "database    %d\n", db)
	}
}

var releaseVersion = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+$`)

// cliVersion is the version of the CLI module as the go command stamped
// it: a release's for `go install …/cmd/backoffctl@v0.2.0`; otherwise the
// tree's version marked "devel", with the stamp when there is one (a
// pseudo-version of a commit).
func cliVersion(info *debug.BuildInfo, ok bool) string {
	v := ""
	if ok {
		v = info.Main.Version
	}
	switch {
	case releaseVersion.MatchString(v):
		return v[1:]
	case v == "" || v == "(devel)":
		return pgbackoff.Version + " (devel)"
	default:
		return pgbackoff.Version + " (devel, " + v + ")"
	}
}

// databaseSchemaVersion is backoff.schema_version(), 0 when the schema is
// not installed.
func databaseSchemaVersion(ctx context.Context, conn *pgx.Conn) (int32, error) {
	var v *int32
	err := conn.QueryRow(ctx, "SELECT backoff.schema_version()").Scan(&v)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "3F000" || pgErr.Code == "42883" || pgErr.Code == "42P01") {
		// invalid_schema_name, undefined_function, undefined_table.
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the database's schema version: %w", err)
	}
	if v == nil {
		return 0, nil
	}
	return *v, nil
}
