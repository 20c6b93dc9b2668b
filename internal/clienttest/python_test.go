package clienttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// python is Debian's interpreter, where python3-psycopg, python3-psycopg-pool,
// python3-pytest and mypy are installed (.ci/run); another python3 on PATH
// may lack them.
const python = "/usr/bin/python3"

var pythonDir = filepath.Join("..", "..", "clients", "python")

// requirePython checks that python can import modules; it skips on a
// developer machine that lacks them and fails in CI, where .ci/run installs
// them.
func requirePython(t *testing.T, modules string) {
	t.Helper()
	out, err := exec.Command(python, "-c", "import "+modules).CombinedOutput()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s with %s is needed for this test (CI is set): %v\n%s", python, modules, err, out)
		}
		t.Skipf("%s with %s is not available: %v\n%s", python, modules, err, out)
	}
}

// TestPythonPackage runs the package's pytest suite. It gets a fresh
// database migrated to the latest version; the fixture copies it for every
// test (clients/python/tests/conftest.py).
func TestPythonPackage(t *testing.T) {
	t.Parallel()
	requirePython(t, "psycopg, psycopg_pool, pytest")
	cmd := exec.Command(python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests")
	cmd.Dir = pythonDir
	cmd.Env = append(os.Environ(), "TEST_DATABASE_URL="+testdb.NewURL(t), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Log(string(out))
	require.NoError(t, err, "pytest failed")
}

// TestPythonPackageTypes: the package is clean under mypy --strict
// (settings in clients/python/pyproject.toml).
func TestPythonPackageTypes(t *testing.T) {
	t.Parallel()
	requirePython(t, "mypy")
	cmd := exec.Command(python, "-m", "mypy", "--strict", "--cache-dir=/dev/null", "src/pgbackoff")
	cmd.Dir = pythonDir
	out, err := cmd.CombinedOutput()
	t.Log(string(out))
	require.NoError(t, err, "mypy --strict found problems")
}
