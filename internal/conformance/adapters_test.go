package conformance_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// root is the repository's root, from this package's directory.
const root = "../.."

// python is Debian's interpreter, where psycopg and psycopg_pool are
// installed (.ci/run), as in internal/clienttest.
const python = "/usr/bin/python3"

// language is one adapter: how to start a worker of that language with a
// scenario's settings (a JSON object).
type language struct {
	name  string
	start func(t *testing.T, dbURL, settings string) *exec.Cmd
}

// languages are the adapters, built once per test binary.
func languages(t *testing.T) []language {
	t.Helper()
	goBin := buildGo(t)
	requirePython(t)
	node, tsDist := buildTypeScript(t)
	abs := func(p string) string {
		a, err := filepath.Abs(filepath.Join(root, p))
		require.NoError(t, err)
		return a
	}
	pyScript, nodeScript := abs("conformance/python/worker.py"), abs("conformance/typescript/worker.mjs")
	return []language{
		{"go", func(t *testing.T, dbURL, s string) *exec.Cmd { return exec.Command(goBin, dbURL, s) }},
		{"python", func(t *testing.T, dbURL, s string) *exec.Cmd {
			cmd := exec.Command(python, pyScript, dbURL, s)
			cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
			return cmd
		}},
		{"typescript", func(t *testing.T, dbURL, s string) *exec.Cmd {
			cmd := exec.Command(node, nodeScript, dbURL, s)
			cmd.Env = append(os.Environ(), "PGBACKOFF_TS_DIST="+tsDist)
			return cmd
		}},
	}
}

var (
	goOnce  sync.Once
	goBin   string
	goErr   error
	tsOnce  sync.Once
	tsDist  string
	tsErr   error
	tmpOnce sync.Once
	tmpDir  string
)

// buildDir is a directory for the adapters' builds that lives as long as
// the test binary (TestMain removes it).
func buildDir() string {
	tmpOnce.Do(func() {
		var err error
		tmpDir, err = os.MkdirTemp("", "pgbackoff-conformance-")
		if err != nil {
			panic(err)
		}
	})
	return tmpDir
}

func buildGo(t *testing.T) string {
	t.Helper()
	goOnce.Do(func() {
		goBin = filepath.Join(buildDir(), "goworker")
		out, err := exec.Command("go", "build", "-o", goBin, "github.com/pgbackoff/pgbackoff/conformance/goworker").CombinedOutput()
		if err != nil {
			goErr = &buildError{"go build conformance/goworker", err, out}
		}
	})
	require.NoError(t, goErr)
	return goBin
}

type buildError struct {
	what string
	err  error
	out  []byte
}

func (e *buildError) Error() string { return e.what + ": " + e.err.Error() + "\n" + string(e.out) }

// requirePython skips on a developer machine without psycopg and fails in
// CI, which installs it.
func requirePython(t *testing.T) {
	t.Helper()
	if out, err := exec.Command(python, "-c", "import psycopg, psycopg_pool").CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s with psycopg and psycopg_pool is needed (CI is set): %v\n%s", python, err, out)
		}
		t.Skipf("%s with psycopg and psycopg_pool is not available: %v\n%s", python, err, out)
	}
}

// buildTypeScript compiles the package with tsc into a directory of its
// own (clients/typescript/dist belongs to internal/clienttest, which
// removes it), with node_modules linked beside it so that `pg` resolves.
func buildTypeScript(t *testing.T) (node, dist string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err == nil {
		err = exec.Command(node, "--version").Run()
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("node is needed for the TypeScript adapter (CI is set): %v", err)
		}
		t.Skipf("node is not available: %v", err)
	}
	tsOnce.Do(func() {
		pkg, err := filepath.Abs(filepath.Join(root, "clients", "typescript"))
		if err != nil {
			tsErr = err
			return
		}
		if tsErr = npmCI(pkg); tsErr != nil {
			return
		}
		out := filepath.Join(buildDir(), "ts")
		if tsErr = os.Symlink(filepath.Join(pkg, "node_modules"), filepath.Join(buildDir(), "node_modules")); tsErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		b, err := exec.CommandContext(ctx, filepath.Join(pkg, "node_modules", ".bin", "tsc"), "-p", pkg, "--outDir", out).CombinedOutput()
		if err != nil {
			tsErr = &buildError{"tsc", err, b}
			return
		}
		tsDist = out
	})
	require.NoError(t, tsErr)
	return node, tsDist
}

// npmCI installs the lockfile's packages unless node_modules holds the
// stamp of this very lockfile (the stamp internal/clienttest writes),
// under a lock on the package directory so the two never install at once.
func npmCI(pkg string) error {
	lock, err := os.ReadFile(filepath.Join(pkg, "package-lock.json"))
	if err != nil {
		return err
	}
	sum := sha256.Sum256(lock)
	want := hex.EncodeToString(sum[:])
	stamp := filepath.Join(pkg, "node_modules", ".pgbackoff-lockfile-sha256")
	f, err := os.Open(pkg)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	defer syscall.Flock(int(f.Fd()), syscall.LOCK_UN) //nolint:errcheck // closing the file releases it too
	if have, err := os.ReadFile(stamp); err == nil && string(bytes.TrimSpace(have)) == want {
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return err
	}
	cmd := exec.Command(npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = pkg
	if out, err := cmd.CombinedOutput(); err != nil {
		return &buildError{"npm ci", err, out}
	}
	return os.WriteFile(stamp, []byte(want+"\n"), 0o644)
}
