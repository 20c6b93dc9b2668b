package clienttest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// typescriptDir is the TypeScript package, from this package's directory.
const typescriptDir = "../../clients/typescript"

// TestTypeScriptClient installs the TypeScript package's pinned
// dependencies (npm ci, skipped while node_modules matches the lockfile),
// compiles it with tsc and runs its tests (node --test) against a fresh
// database with the schema installed and time injection on.
func TestTypeScriptClient(t *testing.T) {
	t.Parallel()
	node := nodeTool(t, "node")
	npm := nodeTool(t, "npm")
	dir, err := filepath.Abs(typescriptDir)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	npmCI(ctx, t, npm, dir)
	// Output of files since removed must not run as tests.
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "dist")))
	run(ctx, t, dir, nil, filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", ".")

	out := run(ctx, t, dir, []string{"TEST_DATABASE_URL=" + testdb.NewURL(t)},
		node, "--test", "--test-concurrency=1", "--test-force-exit", "--test-reporter=tap", "dist/tests/")
	summary := regexp.MustCompile(`(?m)^# (tests|pass|fail|skipped) \d+$`).FindAllString(out, -1)
	t.Logf("node --test: %v", summary)
	pass := regexp.MustCompile(`(?m)^# pass (\d+)$`).FindStringSubmatch(out)
	require.NotNil(t, pass, "node --test printed no summary:\n%s", out)
	n, err := strconv.Atoi(pass[1])
	require.NoError(t, err)
	require.Greater(t, n, 20, "the TypeScript suite ran too few tests:\n%s", out)
	require.Regexp(t, `(?m)^# fail 0$`, out, out)
	require.Regexp(t, `(?m)^# skipped 0$`, out, "a skipped test hides what it should prove:\n%s", out)
}

// nodeTool finds node or npm; it skips on a developer machine without
// Node.js and fails when CI is set, so CI can never pass without running
// the suite.
func nodeTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		err = exec.Command(path, "--version").Run()
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is needed for the TypeScript client's tests (CI is set): %v", name, err)
		}
		t.Skipf("%s is not available: %v", name, err)
	}
	return path
}

// npmCI installs exactly the lockfile's packages, unless the last install
// was of this very lockfile (a stamp in node_modules records its hash).
// Scripts stay off: the package is built by tsc below, and no dependency
// needs an install script.
func npmCI(ctx context.Context, t *testing.T, npm, dir string) {
	t.Helper()
	lock, err := os.ReadFile(filepath.Join(dir, "package-lock.json"))
	require.NoError(t, err)
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(dir, "node_modules", ".pgbackoff-lockfile-sha256")
	// internal/conformance installs under the same lock: never two at once.
	f, err := os.Open(dir)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, syscall.Flock(int(f.Fd()), syscall.LOCK_EX))
	if have, err := os.ReadFile(stamp); err == nil && string(bytes.TrimSpace(have)) == want {
		return
	}
	run(ctx, t, dir, nil, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	require.NoError(t, os.WriteFile(stamp, []byte(want+"\n"), 0o644))
}

// run runs a command in dir and returns its output; a failure fails the test
// with that output.
func run(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s %v:\n%s", name, args, out)
	return string(out)
}
