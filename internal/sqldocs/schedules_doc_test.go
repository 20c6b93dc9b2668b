package sqldocs_test

import (
	"context"
	"os"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/sqldocs"
)

// docExample finds the fenced sql block after marker in a page, and the
// text block that shows its output.
var docExample = regexp.MustCompile("(?s)<!-- example: run by internal/sqldocs \\(TestSchedulesDocExample\\) -->\n```sql\n(.*?)```\n\n```text\n(.*?)```")

// TestSchedulesDocExample runs the SQL example of docs/schedules.md on a
// fresh database, in UTC, and requires the output the page shows.
func TestSchedulesDocExample(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../../docs/schedules.md")
	require.NoError(t, err)
	m := docExample.FindSubmatch(page)
	require.NotNil(t, m, "docs/schedules.md has no tested example")
	conn, _ := load(t)
	ctx := context.Background()
	_, err = conn.Exec(ctx, "SET TimeZone = 'UTC'")
	require.NoError(t, err)
	got, err := sqldocs.RunExample(ctx, conn, string(m[1]))
	require.NoError(t, err)
	require.Equal(t, string(m[2]), got)
}
