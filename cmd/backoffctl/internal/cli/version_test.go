package cli

import (
	"fmt"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
	"github.com/pgbackoff/pgbackoff/migrations"
)

// localVersions is what version prints before any database line.
func localVersions() string {
	return fmt.Sprintf("backoffctl  %s\nlibrary     %s\nschema      %d\n",
		cliVersion(debug.ReadBuildInfo()), pgbackoff.Version, migrations.Latest())
}

// Without a database, version prints what the binary knows and connects
// nowhere.
func TestVersionWithoutDatabase(t *testing.T) {
	t.Setenv("DATABASE_URL", "")
	code, out, errOut := run(t, "version")
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, localVersions(), out)

	code, out, errOut = run(t, "version", "--output", "json")
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, fmt.Sprintf("{\n  \"backoffctl\": %q,\n  \"library\": %q,\n  \"schema\": %d\n}\n",
		cliVersion(debug.ReadBuildInfo()), pgbackoff.Version, migrations.Latest()), out)

	code, _, errOut = run(t, "version", "extra")
	require.Equal(t, ExitUsage, code)
	require.Equal(t, "backoffctl: version takes no arguments, got \"extra\"\n", errOut)
}

// With a database, version adds its schema version and what migrate up
// would do to it.
func TestVersionOfDatabase(t *testing.T) {
	t.Parallel()
	latest := migrations.Latest()
	url := testdb.NewURL(t)
	code, out, errOut := run(t, "version", "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, localVersions()+fmt.Sprintf("database    %d\n", latest), out)

	code, out, errOut = run(t, "version", "--database-url", url, "--output", "json")
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, fmt.Sprintf("  \"schema\": %d,\n  \"database\": %d\n}\n", latest, latest))

	code, _, errOut = run(t, "migrate", "down", "--target", "3", "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	code, out, errOut = run(t, "version", "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, localVersions()+fmt.Sprintf("database    3 (migrate up moves it to %d)\n", latest), out)

	code, out, errOut = run(t, "version", "--database-url", testdb.NewEmptyURL(t))
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, localVersions()+fmt.Sprintf("database    0 (not installed; migrate up installs %d)\n", latest), out)

	code, out, errOut = run(t, "version", "--database-url", "postgres://nobody@127.0.0.1:1/none?connect_timeout=1")
	require.Equal(t, ExitFailure, code)
	require.Empty(t, out)
	require.Regexp(t, "^backoffctl: connect to 127.0.0.1:1: [^\n]+\n$", errOut)
}

func TestCLIVersion(t *testing.T) {
	t.Parallel()
	dev := pgbackoff.Version + " (devel)"
	pseudo := "v0.1.1-0.20260101120000-0123456789ab+dirty"
	for stamped, want := range map[string]string{
		"v0.2.0":  "0.2.0",
		"(devel)": dev,
		"":        dev,
		pseudo:    pgbackoff.Version + " (devel, " + pseudo + ")",
	} {
		require.Equal(t, want, cliVersion(&debug.BuildInfo{Main: debug.Module{Version: stamped}}, true), stamped)
	}
	require.Equal(t, dev, cliVersion(nil, false))
}
