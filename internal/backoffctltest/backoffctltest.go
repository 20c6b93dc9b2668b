// Package backoffctltest builds the backoffctl binary once per test binary
// and runs it, for the root module's tests that drive the CLI (the CLI is
// its own module, cmd/backoffctl, and its packages cannot be imported from
// here; ADR 0042).
//
// The binary is built with `go build` in the cmd/backoffctl directory, so
// the build follows the caller's GOWORK (the go.work at the repository root,
// or with GOWORK=off the module's replace directive). Call Cleanup from
// TestMain to remove it.
package backoffctltest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var build struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Path returns the path of a backoffctl binary built from this checkout,
// building it on the first call. The test fails if it cannot be built.
func Path(t testing.TB) string {
	t.Helper()
	build.once.Do(func() { build.path, build.err = buildBinary() })
	if build.err != nil {
		t.Fatalf("backoffctltest: %v", build.err)
	}
	return build.path
}

func buildBinary() (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("build backoffctl: cannot locate the source tree")
	}
	cmdDir := filepath.Join(filepath.Dir(file), "..", "..", "cmd", "backoffctl")
	dir, err := os.MkdirTemp("", "backoffctltest-")
	if err != nil {
		return "", fmt.Errorf("build backoffctl: %w", err)
	}
	build.dir = dir
	bin := filepath.Join(dir, "backoffctl")
	// go test puts its own GOROOT/bin first on PATH: the same toolchain.
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = cmdDir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build backoffctl in %s: %w\n%s", cmdDir, err, out)
	}
	return bin, nil
}

// Exec runs the binary bin with args. It returns what the command wrote and
// its exit code; err is set only when the command could not be run or did
// not exit by itself (a signal). Safe to call from any goroutine.
func Exec(ctx context.Context, bin string, args ...string) (stdout, stderr string, code int, err error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.Exited() {
		return out.String(), errOut.String(), exit.ExitCode(), nil
	}
	if err != nil {
		return out.String(), errOut.String(), -1, fmt.Errorf("run backoffctl %v: %w", args, err)
	}
	return out.String(), errOut.String(), 0, nil
}

// Run runs backoffctl with args and returns its standard output, standard
// error and exit code. The test fails if the command cannot be run.
func Run(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	stdout, stderr, code, err := Exec(t.Context(), Path(t), args...)
	if err != nil {
		t.Fatalf("backoffctltest: %v\n%s%s", err, stdout, stderr)
	}
	return stdout, stderr, code
}

// Cleanup removes the binary Path built, if any. Call it from TestMain
// after the tests ran.
func Cleanup() {
	if build.dir != "" {
		_ = os.RemoveAll(build.dir)
	}
}
