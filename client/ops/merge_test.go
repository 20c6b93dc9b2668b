package ops

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/client/jobtype"
)

// Behind a router every shard answers a read for its own jobs; these merge
// the answers as one database would have given them.

func TestPageOfMergesShards(t *testing.T) {
	t.Parallel()
	d := func(ids ...int64) []JobDetail {
		out := make([]JobDetail, len(ids))
		for i, id := range ids {
			out[i].ID = id
		}
		return out
	}
	ids := func(p JobPage) []int64 {
		out := []int64{}
		for _, j := range p.Jobs {
			out = append(out, j.ID)
		}
		return out
	}
	// Two shards' pages of limit+1 rows each: the first limit of the
	// merged order, and the cursor after the last shown.
	p := pageOf(append(d(1, 4, 7, 9), d(2, 3, 8, 10)...), nil, OldestFirst, 3)
	require.Equal(t, []int64{1, 2, 3}, ids(p))
	require.Equal(t, "3", p.Next)
	p = pageOf(append(d(9, 7, 4, 1), d(10, 8, 3, 2)...), nil, NewestFirst, 3)
	require.Equal(t, []int64{10, 9, 8}, ids(p))
	require.Equal(t, "8", p.Next)
	p = pageOf(append(d(1), d(2)...), nil, OldestFirst, 3)
	require.Equal(t, []int64{1, 2}, ids(p))
	require.Empty(t, p.Next, "the last page")

	// A search that stopped on one shard at job 5: jobs past it come again
	// on the next page, so the page ends there and continues after 5.
	p = pageOf(append(d(2), d(3, 6, 9)...), []jobtype.Job{{ID: 5}}, OldestFirst, 3)
	require.Equal(t, []int64{2, 3}, ids(p))
	require.Equal(t, "5", p.Next)
	require.True(t, p.Searched)
	// Two stops: the earliest in the order.
	p = pageOf(d(9, 4), []jobtype.Job{{ID: 3}, {ID: 6}}, NewestFirst, 5)
	require.Equal(t, []int64{9}, ids(p))
	require.Equal(t, "6", p.Next)

	// The finished order: completion time, then id, both descending.
	at := func(m int) *time.Time { v := time.Unix(int64(m)*60, 0).UTC(); return &v }
	rows := []JobDetail{{Job: jobtype.Job{ID: 1, CompletedAt: at(5)}}, {Job: jobtype.Job{ID: 7, CompletedAt: at(3)}},
		{Job: jobtype.Job{ID: 2, CompletedAt: at(5)}}, {Job: jobtype.Job{ID: 3, CompletedAt: at(9)}}}
	p = pageOf(rows, nil, RecentlyFinishedFirst, 3)
	require.Equal(t, []int64{3, 2, 1}, ids(p))
	require.Equal(t, cursorOf(1, at(5), RecentlyFinishedFirst), p.Next)
}

func TestMergeGroupsAndReasons(t *testing.T) {
	t.Parallel()
	t1, t2, t3 := time.Unix(100, 0), time.Unix(200, 0), time.Unix(300, 0)
	g := mergeGroups([]DeadLetterGroup{
		{Queue: "a", Reason: "r", Signature: "s", Count: 2, FirstSeen: t2, LastSeen: t2, Example: "on shard 1"},
		{Queue: "b", Reason: "r", Signature: "s", Count: 3, FirstSeen: t1, LastSeen: t1, Example: "b"},
		{Queue: "a", Reason: "r", Signature: "s", Count: 2, FirstSeen: t1, LastSeen: t3, Example: "on shard 2, newer"},
		{Queue: "a", Reason: "r", Signature: "x", Count: 1, FirstSeen: t1, LastSeen: t1, Example: "x"},
	}, 2)
	require.Equal(t, []DeadLetterGroup{
		{Queue: "a", Reason: "r", Signature: "s", Count: 4, FirstSeen: t1, LastSeen: t3, Example: "on shard 2, newer"},
		{Queue: "b", Reason: "r", Signature: "s", Count: 3, FirstSeen: t1, LastSeen: t1, Example: "b"},
	}, g)

	r := mergeReasons([]DeadLetterReason{
		{Queue: "a", Reason: "", Count: 1, CountExact: true},
		{Queue: "a", Reason: "max_attempts", Count: 5, CountExact: true, FirstSeen: t2, LastSeen: t2},
		{Queue: "a", Reason: "max_attempts", Count: 7, CountExact: false, FirstSeen: t1, LastSeen: t3},
		{Queue: "a", Reason: "deadline", Count: 2, CountExact: true, FirstSeen: t1, LastSeen: t1},
	})
	require.Equal(t, []DeadLetterReason{
		{Queue: "a", Reason: "deadline", Count: 2, CountExact: true, FirstSeen: t1, LastSeen: t1},
		{Queue: "a", Reason: "max_attempts", Count: 12, CountExact: false, FirstSeen: t1, LastSeen: t3},
		{Queue: "a", Reason: "", Count: 1, CountExact: true},
	}, r, "by queue and reason, no reason last as in the index")
}
