package clienttest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestPythonPackageInVenv installs clients/python the way a Python user
// does, with pip into a fresh virtual environment, and runs the pytest
// suite with that environment's interpreter against the installed copy, not
// the source tree. The package index is not needed: the venv sees Debian's
// python3-psycopg, python3-psycopg-pool, python3-pytest, python3-setuptools
// and python3-wheel (--system-site-packages) and pip installs offline
// (--no-build-isolation --no-index). It takes a few seconds more than
// TestPythonPackage and repeats its suite, so make test skips it; make
// test-python-venv (and .ci/run) sets BACKOFF_PYTHON_VENV.
func TestPythonPackageInVenv(t *testing.T) {
	if os.Getenv("BACKOFF_PYTHON_VENV") == "" {
		t.Skip("BACKOFF_PYTHON_VENV is not set (make test-python-venv)")
	}
	requirePython(t, "psycopg, psycopg_pool, pytest, setuptools, wheel, venv, ensurepip")
	src, err := filepath.Abs(pythonDir)
	require.NoError(t, err)
	venv := filepath.Join(t.TempDir(), "venv")
	run := func(dir, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PIP_DISABLE_PIP_VERSION_CHECK=1", "PIP_NO_CACHE_DIR=1")
		out, err := cmd.CombinedOutput()
		t.Logf("%s %s\n%s", name, strings.Join(args, " "), out)
		require.NoError(t, err, "%s %s", name, strings.Join(args, " "))
		return string(out)
	}
	run("", python, "-m", "venv", "--system-site-packages", venv)
	vpy := filepath.Join(venv, "bin", "python")
	// pip copies the source into a temporary build directory, so the
	// build leaves nothing behind in the tree.
	run("", vpy, "-m", "pip", "install", "--no-build-isolation", "--no-index", src)

	// The venv's interpreter imports the installed copy: run from a
	// directory with no source beside it.
	where := strings.TrimSpace(run(t.TempDir(), vpy, "-c", "import pgbackoff, sys; print(pgbackoff.__file__)"))
	require.True(t, strings.HasPrefix(where, venv+string(filepath.Separator)), "pgbackoff imported from %s, not from the venv %s", where, venv)
	run(t.TempDir(), vpy, "-c", "import importlib.resources as r; assert r.files('pgbackoff').joinpath('py.typed').is_file(), 'py.typed is not installed'")

	// pyproject.toml puts src/ on pytest's path for development; emptied
	// here, the tests import what pip installed.
	cmd := exec.Command(vpy, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-o", "pythonpath=", "tests")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "TEST_DATABASE_URL="+testdb.NewURL(t), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	t.Log(string(out))
	require.NoError(t, err, "pytest from the venv failed")
}
