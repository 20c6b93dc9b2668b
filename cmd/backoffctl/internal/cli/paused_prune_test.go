package cli

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestConfigApplyPruneKeepsPausedQueue: apply --prune does not delete a
// queue that only the database has while an operator has it paused (the
// delete would un-pause it: the queue would run again under 'default'),
// nor the database-only policy that queue uses; it says so, one line each,
// and exits 0. diff shows the pause. Once resumed, --prune deletes both.
func TestConfigApplyPruneKeepsPausedQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url := testdb.NewURL(t)
	code, _, errOut := run(t, "config", "apply", "--config", example, "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	sqlExec(t, url, `INSERT INTO backoff.policies (name) VALUES ('legacy');
		INSERT INTO backoff.queues (name, policy) VALUES ('old', 'legacy'), ('stale', 'default')`)
	sqlExec(t, url, `SELECT backoff.pause_queue('old')`)
	// A configured queue that drifted and is paused: its "~" line says so.
	sqlExec(t, url, `UPDATE backoff.queues SET rate = 7 WHERE name = 'webhooks'`)
	sqlExec(t, url, `SELECT backoff.pause_queue('webhooks')`)
	pool := testdb.Pool(t, url)
	queues := func() []string {
		var q []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(name || ':' || paused ORDER BY name)
			FROM backoff.queues WHERE name IN ('old', 'stale')`).Scan(&q))
		return q
	}

	code, out, errOut := run(t, "config", "diff", "--config", example, "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	require.Contains(t, out, "~ queue webhooks (paused)\n    rate: 7.0 -> 50.0\n")
	require.Contains(t, out, "  queue old: only in the database, paused (kept; apply --prune keeps it while it is paused)\n")
	require.Contains(t, out, "  queue stale: only in the database (kept; apply --prune deletes it)\n")
	require.Contains(t, out, "  policy legacy: only in the database (kept; apply --prune keeps it while paused queue \"old\" uses it)\n")

	code, out, errOut = run(t, "config", "apply", "--config", example, "--prune", "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	require.Empty(t, errOut)
	require.Equal(t, `~ queue webhooks (paused)
    rate: 7.0 -> 50.0
kept policy "legacy": used by paused queue "old"
kept queue "old": paused; resume it first or add it to the config
- queue stale (deleted: only in the database)
applied ../../../../examples/backoff.toml: 0 added, 1 updated, 1 deleted
`, out)
	require.Equal(t, []string{"old:true"}, queues())
	var webhooksPaused bool
	require.NoError(t, pool.QueryRow(ctx, `SELECT paused FROM backoff.queues WHERE name = 'webhooks'`).Scan(&webhooksPaused))
	require.True(t, webhooksPaused, "apply never changes paused")
	var legacy int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM backoff.policies WHERE name = 'legacy'`).Scan(&legacy))
	require.Equal(t, 1, legacy)

	// Again: nothing to delete, so no change; the kept lines stay.
	code, out, errOut = run(t, "config", "apply", "--config", example, "--prune", "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, `no change: the database matches ../../../../examples/backoff.toml
kept policy "legacy": used by paused queue "old"
kept queue "old": paused; resume it first or add it to the config
`, out)
	code, out, errOut = run(t, "config", "apply", "--config", example, "--prune", "--database-url", url, "--output", "json")
	require.Equal(t, ExitOK, code, errOut)
	var res struct {
		Changed bool             `json:"changed"`
		Changes []map[string]any `json:"changes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	require.False(t, res.Changed)
	require.Len(t, res.Changes, 2)
	require.Equal(t, map[string]any{"kind": "extra", "object": "queue", "name": "old", "note": "only in the database",
		"paused": true, "kept": "paused; resume it first or add it to the config"}, res.Changes[1])

	// Resumed, it is deleted, and its policy with it.
	sqlExec(t, url, `SELECT backoff.resume_queue('old')`)
	code, out, errOut = run(t, "config", "apply", "--config", example, "--prune", "--database-url", url)
	require.Equal(t, ExitOK, code, errOut)
	require.Equal(t, `- policy legacy (deleted: only in the database)
- queue old (deleted: only in the database)
applied ../../../../examples/backoff.toml: 0 added, 0 updated, 2 deleted
`, out)
	require.Nil(t, queues())
}
