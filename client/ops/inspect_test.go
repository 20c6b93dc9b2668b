package ops_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client"
	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/internal/testdb"
)

// TestOperatorCallsAgainstPostgres: the calls backoffctl (and a web UI) is
// built on, against the real functions: filters and keyset pages of List,
// Details, Queues, PauseQueue/ResumeQueue and ReplayDeadLetters.
func TestOperatorCallsAgainstPostgres(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	now := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	c, o := clientsAt(t, pool, &now)
	_, err := pool.Exec(ctx, `INSERT INTO backoff.policies (name, max_attempts) VALUES ('strict', 2);
		INSERT INTO backoff.queues (name, policy) VALUES ('mail', 'strict')`)
	require.NoError(t, err)

	// Seven dead letters in mail (one with a dedupe key), three pending jobs
	// in hooks.
	var dead []int64
	for i := range 7 {
		var opts []client.EnqueueOption
		if i == 5 {
			opts = append(opts, client.DedupeKey("k"))
		}
		id, err := c.Enqueue(ctx, "mail", nil, opts...)
		require.NoError(t, err)
		j, err := c.Acquire(ctx, id, 0)
		require.NoError(t, err)
		_, err = c.Fail(ctx, id, j.Token, fmt.Sprintf("SMTP error %d", i), client.NonRetryable())
		require.NoError(t, err)
		dead = append(dead, id)
		now = now.Add(time.Second)
	}
	for range 3 {
		_, err := c.Enqueue(ctx, "hooks", nil)
		require.NoError(t, err)
	}

	// Keyset pages, newest finished first, with every filter that matches.
	params := ops.ListParams{Queue: "mail", Statuses: []client.Status{client.StatusDeadLettered}, Policy: "strict",
		DeadLetterReason: "non_retryable", ErrorContains: "smtp ERROR", FinishedFrom: now.Add(-time.Hour),
		Order: ops.RecentlyFinishedFirst, Limit: 3}
	var got []int64
	pages := 0
	for {
		page, err := o.List(ctx, params)
		require.NoError(t, err)
		pages++
		for _, j := range page.Jobs {
			got = append(got, j.ID)
			require.Equal(t, "strict", j.EffectivePolicy)
			require.Equal(t, 2, j.EffectiveMaxAttempts)
		}
		if page.Next == "" {
			break
		}
		params.Cursor = page.Next
	}
	require.Equal(t, 3, pages)
	require.Equal(t, []int64{dead[6], dead[5], dead[4], dead[3], dead[2], dead[1], dead[0]}, got)

	// Filters that exclude.
	for _, p := range []ops.ListParams{
		{Queue: "mail", ErrorContains: "timeout"},
		{Queue: "mail", Policy: "default"},
		{Queue: "mail", DeadLetterReason: "deadline"},
		{Queue: "mail", CreatedTo: time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)},
	} {
		page, err := o.List(ctx, p)
		require.NoError(t, err)
		require.Empty(t, page.Jobs, "%+v", p)
	}
	page, err := o.List(ctx, ops.ListParams{Queue: "hooks", Order: ops.NewestFirst})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 3)
	require.Equal(t, "default", page.Jobs[0].EffectivePolicy)
	require.Greater(t, page.Jobs[0].ID, page.Jobs[2].ID)

	d, err := o.Details(ctx, dead[0])
	require.NoError(t, err)
	require.Equal(t, "SMTP error 0", d.LastError)
	require.Len(t, d.Errors, 1)
	require.JSONEq(t, `[{"attempt": 1, "counted": 1, "at": "2030-06-01T00:00:00.000000Z", "error": "SMTP error 0", "worker": "ops", "kind": "error", "started": "2030-06-01T00:00:00.000000Z"}]`,
		string(d.ErrorsJSON))
	_, err = o.Details(ctx, 999999)
	require.ErrorIs(t, err, client.ErrJobNotFound)

	// Pause: claims stop, the queue list says so; resume.
	changed, err := o.PauseQueue(ctx, "hooks")
	require.NoError(t, err)
	require.True(t, changed)
	queues, err := o.Queues(ctx)
	require.NoError(t, err)
	require.Equal(t, []ops.QueueInfo{{Name: "hooks", Policy: "default", Paused: true, Configured: true, BreakerProbes: 1},
		{Name: "mail", Policy: "strict", Configured: true, BreakerProbes: 1}}, queues)
	jobs, err := c.Claim(ctx, "hooks", 10, 0)
	require.NoError(t, err)
	require.Empty(t, jobs)
	changed, err = o.ResumeQueue(ctx, "hooks")
	require.NoError(t, err)
	require.True(t, changed)
	_, err = o.PauseQueue(ctx, "")
	require.ErrorIs(t, err, client.ErrInvalidArgument)

	// A job holds the dedupe key of dead[5]: the bulk replay replays the
	// other six and says why not that one.
	holder, err := c.Enqueue(ctx, "mail", nil, client.DedupeKey("k"))
	require.NoError(t, err)
	outcomes, err := o.ReplayDeadLetters(ctx, "mail")
	require.NoError(t, err)
	require.Len(t, outcomes, 7)
	for i, o := range outcomes {
		require.Equal(t, dead[i], o.JobID)
		require.Equal(t, i != 5, o.Replayed, "job %d", o.JobID)
	}
	require.Equal(t, fmt.Sprintf("dedupe key 'k' is held by unfinished job %d", holder), outcomes[5].Reason)
	j, err := c.Get(ctx, dead[0])
	require.NoError(t, err)
	require.Equal(t, client.StatusPending, j.Status)
	require.True(t, j.RunAt.Equal(now), "replayed at the client's clock")
}

// TestListWithoutPayloadsAndPreview: a listing without payloads leaves the
// payload and the history out, and Preview reads the start of a payload
// with its whole size.
func TestListWithoutPayloadsAndPreview(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t)
	ctx := context.Background()
	c := newTestClient(t, pool)
	o := ops.New(pool)
	big, err := c.Enqueue(ctx, "big", map[string]string{"blob": strings.Repeat("é", 5000)})
	require.NoError(t, err)
	j, err := c.Acquire(ctx, big, 0)
	require.NoError(t, err)
	_, err = c.Fail(ctx, big, j.Token, "boom")
	require.NoError(t, err)
	small, err := c.Enqueue(ctx, "big", map[string]int{"n": 1})
	require.NoError(t, err)

	page, err := o.List(ctx, ops.ListParams{Queue: "big", Order: ops.OldestFirst, WithoutPayloads: true})
	require.NoError(t, err)
	require.Len(t, page.Jobs, 2)
	for _, d := range page.Jobs {
		require.Nil(t, d.Payload)
		require.Nil(t, d.Errors)
		require.Nil(t, d.ErrorsJSON)
	}
	require.Equal(t, "boom", page.Jobs[0].LastError, "the rest of the row is there")
	page, err = o.List(ctx, ops.ListParams{Queue: "big", Order: ops.OldestFirst})
	require.NoError(t, err)
	require.Len(t, page.Jobs[0].Errors, 1, "without the option, as before")

	d, pv, err := o.Preview(ctx, big, 100)
	require.NoError(t, err)
	require.Nil(t, d.Payload)
	require.Len(t, d.Errors, 1, "the history is whole")
	require.Equal(t, "big", d.Queue)
	require.True(t, pv.Truncated)
	require.Equal(t, `{"blob": "`+strings.Repeat("é", 90), pv.Text, "100 characters")
	require.Equal(t, int64(len(`{"blob": ""}`)+2*5000), pv.Bytes)
	_, pv, err = o.Preview(ctx, small, 100)
	require.NoError(t, err)
	require.False(t, pv.Truncated)
	require.Equal(t, `{"n": 1}`, pv.Text)
	_, _, err = o.Preview(ctx, 999999, 100)
	require.ErrorIs(t, err, client.ErrJobNotFound)
	_, _, err = o.Preview(ctx, small, 0)
	require.ErrorIs(t, err, client.ErrInvalidArgument)
}
