package sqldocs_test

import (
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/sqldocs"
)

var workflowsExample = regexp.MustCompile("(?s)<!-- example: run by internal/sqldocs \\(TestWorkflowsDocExample\\) -->\n```sql\n(.*?)```\n\n```text\n(.*?)```")

// TestWorkflowsDocExample runs the SQL example of docs/workflows.md on a
// fresh database and requires the output the page shows.
func TestWorkflowsDocExample(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/workflows.md")
	require.NoError(t, err)
	m := workflowsExample.FindSubmatch(page)
	require.NotNil(t, m, "docs/workflows.md has no tested example")
	conn, _ := load(t)
	ctx := context.Background()
	got, err := sqldocs.RunExample(ctx, conn, string(m[1]))
	require.NoError(t, err)
	require.Equal(t, string(m[2]), got)
}
