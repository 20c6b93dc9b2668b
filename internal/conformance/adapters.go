package conformance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
)

// Python is Debian's interpreter, where python3-psycopg and
// python3-psycopg-pool are installed (.ci/run); another python3 on PATH
// may lack them.
const Python = "/usr/bin/python3"

// ErrMissingTool: a language's runtime is not installed (Node.js, or
// Python with psycopg); the error says which.
var ErrMissingTool = errors.New("conformance: a language's runtime is missing")

// Adapter starts a worker of one language on one queue with a scenario's
// settings (a JSON object: conformance/README.md).
type Adapter struct {
	Language string
	command  func(dbURL, settings string) *exec.Cmd
}

// Command returns the adapter's process, not started. The worker runs
// until SIGTERM, shuts down and exits 0.
func (a Adapter) Command(dbURL, settings string) *exec.Cmd { return a.command(dbURL, settings) }

// Build builds the Go adapter and the TypeScript package into dir (which
// must outlive the adapters), given the repository's root, and returns the
// three adapters: Go, Python and TypeScript. A missing Node.js or Python
// is ErrMissingTool.
func Build(ctx context.Context, root, dir string) ([]Adapter, error) {
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	goBin := filepath.Join(dir, "goworker")
	build := exec.CommandContext(ctx, "go", "build", "-o", goBin, "./conformance/goworker")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build conformance/goworker: %w\n%s", err, out)
	}
	if out, err := exec.CommandContext(ctx, Python, "-c", "import psycopg, psycopg_pool").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: %s with psycopg and psycopg_pool: %v\n%s", ErrMissingTool, Python, err, out)
	}
	node, err := exec.LookPath("node")
	if err == nil {
		err = exec.CommandContext(ctx, node, "--version").Run()
	}
	if err != nil {
		return nil, fmt.Errorf("%w: node: %v", ErrMissingTool, err)
	}
	dist, err := buildTypeScript(ctx, filepath.Join(root, "clients", "typescript"), dir)
	if err != nil {
		return nil, err
	}
	py := filepath.Join(root, "conformance", "python", "worker.py")
	mjs := filepath.Join(root, "conformance", "typescript", "worker.mjs")
	return []Adapter{
		{"go", func(dbURL, s string) *exec.Cmd { return exec.Command(goBin, dbURL, s) }},
		{"python", func(dbURL, s string) *exec.Cmd {
			cmd := exec.Command(Python, py, dbURL, s)
			cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
			return cmd
		}},
		{"typescript", func(dbURL, s string) *exec.Cmd {
			cmd := exec.Command(node, mjs, dbURL, s)
			cmd.Env = append(os.Environ(), "PGBACKOFF_TS_DIST="+dist)
			return cmd
		}},
	}, nil
}

// buildTypeScript compiles the package with tsc into dir/ts (its own
// dist/ belongs to internal/clienttest, which removes it), with
// node_modules linked beside it so that `pg` resolves.
func buildTypeScript(ctx context.Context, pkg, dir string) (string, error) {
	if err := npmCI(ctx, pkg); err != nil {
		return "", err
	}
	link := filepath.Join(dir, "node_modules")
	if _, err := os.Lstat(link); err != nil {
		if err := os.Symlink(filepath.Join(pkg, "node_modules"), link); err != nil {
			return "", err
		}
	}
	out := filepath.Join(dir, "ts")
	b, err := exec.CommandContext(ctx, filepath.Join(pkg, "node_modules", ".bin", "tsc"), "-p", pkg, "--outDir", out).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("tsc: %w\n%s", err, b)
	}
	return out, nil
}

// npmCI installs the lockfile's packages unless node_modules holds the
// stamp of this very lockfile (the stamp internal/clienttest writes), under
// a lock on the package directory that internal/clienttest takes too, so
// the two never install at once.
func npmCI(ctx context.Context, pkg string) error {
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
	defer f.Close() // releases the lock
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	if have, err := os.ReadFile(stamp); err == nil && string(bytes.TrimSpace(have)) == want {
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("%w: npm: %v", ErrMissingTool, err)
	}
	cmd := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = pkg
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci: %w\n%s", err, out)
	}
	return os.WriteFile(stamp, []byte(want+"\n"), 0o644)
}
