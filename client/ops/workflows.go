package ops

import (
	"context"
	"fmt"

	"github.com/pgbackoff/pgbackoff/client/internal/sqlapi"
	"github.com/pgbackoff/pgbackoff/client/jobtype"
)

// GraphJob is one job of a workflow as Graph reads it (backoff.job_graph).
type GraphJob struct {
	ID     int64
	Queue  string
	Status jobtype.Status
	// Distance is the fewest dependency edges between this job and the
	// one Graph was asked for (0 for that job itself), whichever their
	// direction.
	Distance int
	// Parents are the edges to the jobs this one depends on, in id order.
	Parents []GraphEdge
	// WaitingFor are the parents a blocked job still waits for: those not
	// finished yet, and those that failed under a "wait" edge until an
	// operator unblocks the job or replays the parent.
	WaitingFor []int64
}

// GraphEdge is an edge from a job to one of its parents.
type GraphEdge struct {
	Parent int64
	// OnFailure is the edge's policy when the parent fails: "cancel",
	// "run" or "wait".
	OnFailure string
	// State is "open" (the parent has not finished), "satisfied",
	// "failed" (the policy was applied), "waiting" (the parent failed
	// under a "wait" edge; an operator's turn) or "released" (by
	// Unblock).
	State string
}

// JobGraph is the workflow a job belongs to.
type JobGraph struct {
	// Jobs are the job asked for and every job reachable from it through
	// dependencies, both ways, nearest first, then by id.
	Jobs []GraphJob
	// Truncated: the graph has more jobs than the limit; Jobs are the
	// nearest.
	Truncated bool
}

// Graph reads the workflow of job jobID (backoff.job_graph): the job and
// every job reachable from it through dependencies, its parents and
// children and theirs, at most limit of them (0: the function's default,
// 1000; at most 10000), nearest first. An unknown id gives
// client.ErrJobNotFound. Behind a router the graph is read on the job's
// shard, where enqueue_graph put the whole graph.
func (c *Client) Graph(ctx context.Context, jobID int64, limit int) (JobGraph, error) {
	op := fmt.Sprintf("read the graph of job %d", jobID)
	args := []sqlapi.Param{sqlapi.Arg("p_job_id", "bigint", jobID)}
	if limit != 0 {
		args = append(args, sqlapi.Arg("p_limit", "integer", limit))
	}
	call, values := sqlapi.Call("job_graph", args...)
	rows, err := c.db.Query(ctx, "SELECT id, queue, status, distance, parent_ids, parent_policies, parent_states, "+
		"waiting_for, truncated FROM "+call, values...)
	if err != nil {
		return JobGraph{}, translate(op, err)
	}
	defer rows.Close()
	g := JobGraph{Jobs: []GraphJob{}}
	for rows.Next() {
		var j GraphJob
		var status string
		var distance int32
		var parents []int64
		var policies, states []string
		if err := rows.Scan(&j.ID, &j.Queue, &status, &distance, &parents, &policies, &states, &j.WaitingFor,
			&g.Truncated); err != nil {
			return JobGraph{}, translate(op, err)
		}
		j.Status, j.Distance = jobtype.Status(status), int(distance)
		j.Parents = make([]GraphEdge, len(parents))
		for i, p := range parents {
			j.Parents[i] = GraphEdge{Parent: p, OnFailure: policies[i], State: states[i]}
		}
		g.Jobs = append(g.Jobs, j)
	}
	if err := rows.Err(); err != nil {
		return JobGraph{}, translate(op, err)
	}
	return g, nil
}

// Unblock releases a blocked job from the parents that failed under a
// "wait" edge (backoff.unblock): those edges count as satisfied, and the
// job becomes pending unless another parent has not finished yet. It
// returns the job. An unknown id gives client.ErrJobNotFound; a job that
// is not blocked, or that no failed parent keeps waiting, gives
// client.ErrInvalidTransition.
func (c *Client) Unblock(ctx context.Context, jobID int64) (jobtype.Job, error) {
	op := fmt.Sprintf("unblock job %d", jobID)
	call, args := c.fn("unblock", sqlapi.Arg("p_job_id", "bigint", jobID))
	j, err := c.queryJob(ctx, "SELECT "+sqlapi.JobColumns+" FROM "+call, args)
	if err != nil {
		return jobtype.Job{}, translate(op, err)
	}
	return j, nil
}
