package pgbackoff_test

import (
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff"
)

// TestVersionIsOne keeps every place that states the release version equal
// to pgbackoff.Version: the extension's control file (which names the
// extension script), the CHANGELOG, and the CLI module's requirement on the
// library, which is either the development replace (../..) or exactly this
// release, never another one.
func TestVersionIsOne(t *testing.T) {
	t.Parallel()
	require.Regexp(t, `^[0-9]+\.[0-9]+\.[0-9]+$`, pgbackoff.Version)

	control, err := os.ReadFile("extension/backoff.control")
	require.NoError(t, err)
	require.Contains(t, string(control), "default_version = '"+pgbackoff.Version+"'\n")

	changelog, err := os.ReadFile("CHANGELOG.md")
	require.NoError(t, err)
	released := regexp.MustCompile(`(?m)^## \[` + regexp.QuoteMeta(pgbackoff.Version) + `\] - [0-9]{4}-[0-9]{2}-[0-9]{2}$`)
	require.True(t, released.Match(changelog) || strings.Contains(string(changelog), "\n## [Unreleased]\n"),
		"CHANGELOG.md has neither a section for %s nor an [Unreleased] one", pgbackoff.Version)

	// go.mod is written by the go command (go mod edit, tidy), so one
	// requirement and one replace are each one line of a known shape.
	mod, err := os.ReadFile("cmd/backoffctl/go.mod")
	require.NoError(t, err)
	req := regexp.MustCompile(`(?m)^\s*(?:require\s+)?github\.com/pgbackoff/pgbackoff (v\S+)`).FindSubmatch(mod)
	require.NotNil(t, req, "the CLI module requires the library")
	required := string(req[1])
	repl := regexp.MustCompile(`(?m)^\s*(?:replace\s+)?github\.com/pgbackoff/pgbackoff => (\S+)`).FindSubmatch(mod)
	replaced := repl != nil
	if replaced {
		require.Equal(t, "../..", string(repl[1]), "the only replace of the library is the development one")
	}
	if !replaced {
		require.Equal(t, "v"+pgbackoff.Version, required, "a CLI without the development replace requires this release")
	}
}
