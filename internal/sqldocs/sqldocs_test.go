package sqldocs_test

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/sqldocs"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

var update = flag.Bool("update", false, "rewrite docs/sql/ from the catalog")

func TestMain(m *testing.M) { testdb.Main(m) }

const docsDir = "../../docs/sql"

func load(t *testing.T) (*pgx.Conn, []sqldocs.Function) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, testdb.NewURL(t))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(ctx) })
	fns, err := sqldocs.Load(ctx, conn)
	require.NoError(t, err)
	require.NotEmpty(t, fns)
	return conn, fns
}

// TestEveryPublicFunctionHasAComment is the contract's rule that each public
// function documents itself in the catalog.
func TestEveryPublicFunctionHasAComment(t *testing.T) {
	t.Parallel()
	_, fns := load(t)
	for _, fn := range fns {
		for _, o := range fn.Overloads {
			require.NotEmpty(t, strings.TrimSpace(o.Comment), "backoff.%s(%s) has no COMMENT ON FUNCTION", fn.Name, o.Arguments)
		}
	}
}

// TestReferencePagesAreCurrent regenerates docs/sql/ (running every example
// against a fresh database) and compares it with the committed pages;
// timestamps are masked because they change from run to run.
func TestReferencePagesAreCurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, fns := load(t)
	pages := map[string]string{"README.md": sqldocs.Index(fns)}
	for _, fn := range fns {
		outputs := make([]string, len(fn.Overloads))
		for i, o := range fn.Overloads {
			if ex := sqldocs.Example(o.Comment); ex != "" {
				// A fresh database per example, so the ids an example creates
				// start at 1 and its output is the same on every run.
				conn, err := pgx.Connect(ctx, testdb.NewURL(t))
				require.NoError(t, err)
				out, err := sqldocs.RunExample(ctx, conn, ex)
				conn.Close(ctx)
				require.NoError(t, err, "example of backoff.%s fails", fn.Name)
				outputs[i] = out
			}
		}
		pages[fn.Name+".md"] = sqldocs.Page(fn, outputs)
	}
	if *update {
		old, _ := filepath.Glob(filepath.Join(docsDir, "*.md"))
		for _, f := range old {
			require.NoError(t, os.Remove(f))
		}
		for name, body := range pages {
			require.NoError(t, os.WriteFile(filepath.Join(docsDir, name), []byte(body), 0o644))
		}
	}
	committed, err := filepath.Glob(filepath.Join(docsDir, "*.md"))
	require.NoError(t, err)
	require.Len(t, committed, len(pages), "docs/sql has stale or missing pages: run `make generate`")
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(docsDir, name))
		require.NoError(t, err, "docs/sql/%s is missing: run `make generate`", name)
		require.Equal(t, sqldocs.MaskVolatile(want), sqldocs.MaskVolatile(string(got)), "docs/sql/%s is stale: run `make generate`", name)
	}
}

func TestParameters(t *testing.T) {
	t.Parallel()
	got := sqldocs.Parameters("p_queue text, p_payload jsonb DEFAULT '{}'::jsonb, p_ids bigint[], p_x numeric DEFAULT round(1.5, 2)")
	require.Equal(t, []sqldocs.Parameter{
		{Name: "p_queue", Type: "text"},
		{Name: "p_payload", Type: "jsonb", Default: "'{}'::jsonb"},
		{Name: "p_ids", Type: "bigint[]"},
		{Name: "p_x", Type: "numeric", Default: "round(1.5, 2)"},
	}, got)
}
