package cli

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/migrations"
)

func TestMigrateUpStatusDownUp(t *testing.T) {
	t.Parallel()
	url := testdb.NewEmptyURL(t)
	latest := migrations.Latest()
	db := "--database-url=" + url

	code, out, errOut := run(t, "migrate", "up", db)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, "migrated up from version 0 to "+itoa(latest)+"\n", out)

	code, out, _ = run(t, "migrate", "up", db)
	require.Equal(t, ExitOK, code)
	require.Equal(t, "no change: schema is at version "+itoa(latest)+"\n", out)

	code, out, _ = run(t, "migrate", "status", db)
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "version "+itoa(latest)+" of "+itoa(latest)+"\n")
	require.Contains(t, out, "    1  applied  001_schema.sql\n")

	code, out, _ = run(t, "migrate", "down", db)
	require.Equal(t, ExitOK, code)
	require.Equal(t, "migrated down from version "+itoa(latest)+" to "+itoa(latest-1)+"\n", out)

	code, out, _ = run(t, "migrate", "down", "--target", "0", db)
	require.Equal(t, ExitOK, code)
	require.Equal(t, "migrated down from version "+itoa(latest-1)+" to 0\n", out)

	code, out, _ = run(t, "migrate", "status", db)
	require.Equal(t, ExitOK, code)
	require.Contains(t, out, "version 0 of "+itoa(latest)+"\n")
	require.Contains(t, out, "    1  pending  001_schema.sql\n")

	code, _, errOut = run(t, "migrate", "up", db)
	require.Equal(t, ExitOK, code, errOut)
}

func TestMigrateErrorsAreOneLine(t *testing.T) {
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"unreachable server", []string{"migrate", "up", "--database-url=postgres://u:p@127.0.0.1:1/db"}, ExitFailure,
			"backoffctl: connect to 127.0.0.1:1: connection refused\n"},
		{"bad url", []string{"migrate", "up", "--database-url=postgres://%%bad"}, ExitUsage,
			"backoffctl: invalid database URL: "},
		{"unknown subcommand", []string{"migrate", "sideways"}, ExitUsage,
			"backoffctl: unknown command \"sideways\" for \"backoffctl migrate\"\n"},
		{"unknown flag", []string{"migrate", "up", "--bogus"}, ExitUsage,
			"backoffctl: unknown flag: --bogus\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("DATABASE_URL", "")
			code, out, errOut := run(t, tc.args...)
			require.Equal(t, tc.code, code)
			require.Empty(t, out)
			require.True(t, strings.HasPrefix(errOut, tc.want), "stderr %q does not start with %q", errOut, tc.want)
			require.Equal(t, 1, strings.Count(errOut, "\n"), "one line")
		})
	}
}

func TestMigrateWithoutDatabase(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	code, _, errOut := run(t, "migrate", "status")
	require.Equal(t, ExitUsage, code)
	require.Equal(t, "backoffctl: no database: pass --database-url or set DATABASE_URL\n", errOut)
}

func TestMigrateTargetBeyondLatest(t *testing.T) {
	t.Parallel()
	url := testdb.NewEmptyURL(t)
	code, _, errOut := run(t, "migrate", "up", "--target=999", "--database-url="+url)
	require.Equal(t, ExitFailure, code)
	require.Contains(t, errOut, "target version 999 is out of range 0..")
}

func itoa(v int32) string { return strconv.Itoa(int(v)) }
