package client

// This file keeps, for one release, the operator API that moved to package
// client/ops (docs/adr/0072-operator-reads-in-sql.md), so that code
// written against the worker's client keeps compiling while it moves.
// Everything here forwards to client/ops; nothing is implemented twice.

import (
	"context"
	"time"

	"github.com/pgbackoff/pgbackoff/client/ops"
	"github.com/pgbackoff/pgbackoff/client/policy"
)

// Ops returns the operator client (package client/ops) over c's DB and
// clock: the moved calls below forward to it.
//
// Deprecated: use ops.New(db) (with ops.WithClock where c has WithClock).
func (c *Client) Ops() *ops.Client {
	if c.cfg.now != nil {
		return ops.New(c.db, ops.WithClock(c.cfg.now))
	}
	return ops.New(c.db)
}

// Activity moved to package client/ops.
//
// Deprecated: use ops.Activity.
type Activity = ops.Activity

// BulkAction moved to package client/ops.
//
// Deprecated: use ops.BulkAction.
type BulkAction = ops.BulkAction

// BulkFilter moved to package client/ops.
//
// Deprecated: use ops.BulkFilter.
type BulkFilter = ops.BulkFilter

// BulkOutcome moved to package client/ops.
//
// Deprecated: use ops.BulkOutcome.
type BulkOutcome = ops.BulkOutcome

// DeadLetterGroup moved to package client/ops.
//
// Deprecated: use ops.DeadLetterGroup.
type DeadLetterGroup = ops.DeadLetterGroup

// DeadLetterOptions moved to package client/ops.
//
// Deprecated: use ops.DeadLetterOptions.
type DeadLetterOptions = ops.DeadLetterOptions

// DeadLetterReason moved to package client/ops.
//
// Deprecated: use ops.DeadLetterReason.
type DeadLetterReason = ops.DeadLetterReason

// DeadLetterSummary moved to package client/ops.
//
// Deprecated: use ops.DeadLetterSummary.
type DeadLetterSummary = ops.DeadLetterSummary

// Health moved to package client/ops.
//
// Deprecated: use ops.Health.
type Health = ops.Health

// JobDetail moved to package client/ops.
//
// Deprecated: use ops.JobDetail.
type JobDetail = ops.JobDetail

// JobOrder moved to package client/ops.
//
// Deprecated: use ops.JobOrder.
type JobOrder = ops.JobOrder

// JobPage moved to package client/ops.
//
// Deprecated: use ops.JobPage.
type JobPage = ops.JobPage

// ListParams moved to package client/ops.
//
// Deprecated: use ops.ListParams.
type ListParams = ops.ListParams

// PayloadPreview moved to package client/ops.
//
// Deprecated: use ops.PayloadPreview.
type PayloadPreview = ops.PayloadPreview

// QueueEvent moved to package client/ops.
//
// Deprecated: use ops.QueueEvent.
type QueueEvent = ops.QueueEvent

// QueueInfo moved to package client/ops.
//
// Deprecated: use ops.QueueInfo.
type QueueInfo = ops.QueueInfo

// QueueOverview moved to package client/ops.
//
// Deprecated: use ops.QueueOverview.
type QueueOverview = ops.QueueOverview

// QueueStats moved to package client/ops.
//
// Deprecated: use ops.QueueStats.
type QueueStats = ops.QueueStats

// ReplayOutcome moved to package client/ops.
//
// Deprecated: use ops.ReplayOutcome.
type ReplayOutcome = ops.ReplayOutcome

// WorkerInfo moved to package client/ops.
//
// Deprecated: use ops.WorkerInfo.
type WorkerInfo = ops.WorkerInfo

// The constants that moved to package client/ops.
//
// Deprecated: use the ops constants of the same names.
const (
	DefaultDeadLetterSample     = ops.DefaultDeadLetterSample
	DefaultDeadLetterCountLimit = ops.DefaultDeadLetterCountLimit
	DefaultDeadLetterGroups     = ops.DefaultDeadLetterGroups
	DefaultDeadLetterPairs      = ops.DefaultDeadLetterPairs
	DefaultHealthMaxAge         = ops.DefaultHealthMaxAge
	ErrorScanLimit              = ops.ErrorScanLimit
	OldestFirst                 = ops.OldestFirst
	NewestFirst                 = ops.NewestFirst
	RecentlyFinishedFirst       = ops.RecentlyFinishedFirst
	BulkReplay                  = ops.BulkReplay
	BulkCancel                  = ops.BulkCancel
)

// List moved to package client/ops.
//
// Deprecated: use ops.Client.List.
func (c *Client) List(ctx context.Context, p ListParams) (JobPage, error) {
	return c.Ops().List(ctx, p)
}

// Details moved to package client/ops.
//
// Deprecated: use ops.Client.Details.
func (c *Client) Details(ctx context.Context, jobID int64) (JobDetail, error) {
	return c.Ops().Details(ctx, jobID)
}

// Preview moved to package client/ops.
//
// Deprecated: use ops.Client.Preview.
func (c *Client) Preview(ctx context.Context, jobID int64, maxChars int) (JobDetail, PayloadPreview, error) {
	return c.Ops().Preview(ctx, jobID, maxChars)
}

// CountJobs moved to package client/ops.
//
// Deprecated: use ops.Client.CountJobs.
func (c *Client) CountJobs(ctx context.Context, p ListParams, limit int) (int64, error) {
	return c.Ops().CountJobs(ctx, p, limit)
}

// Bulk moved to package client/ops.
//
// Deprecated: use ops.Client.Bulk.
func (c *Client) Bulk(ctx context.Context, action BulkAction, f BulkFilter, limit int) ([]BulkOutcome, error) {
	return c.Ops().Bulk(ctx, action, f, limit)
}

// CountBulk moved to package client/ops.
//
// Deprecated: use ops.Client.CountBulk.
func (c *Client) CountBulk(ctx context.Context, f BulkFilter, limit int) (int64, error) {
	return c.Ops().CountBulk(ctx, f, limit)
}

// DeadLetters moved to package client/ops.
//
// Deprecated: use ops.Client.DeadLetters.
func (c *Client) DeadLetters(ctx context.Context, o DeadLetterOptions) (DeadLetterSummary, error) {
	return c.Ops().DeadLetters(ctx, o)
}

// DeadLetterGroups moved to package client/ops.
//
// Deprecated: use ops.Client.DeadLetterGroups.
func (c *Client) DeadLetterGroups(ctx context.Context, queue string, limit int) ([]DeadLetterGroup, error) {
	return c.Ops().DeadLetterGroups(ctx, queue, limit)
}

// ReplayDeadLetters moved to package client/ops.
//
// Deprecated: use ops.Client.ReplayDeadLetters.
func (c *Client) ReplayDeadLetters(ctx context.Context, queue string) ([]ReplayOutcome, error) {
	return c.Ops().ReplayDeadLetters(ctx, queue)
}

// Cancel moved to package client/ops.
//
// Deprecated: use ops.Client.Cancel.
func (c *Client) Cancel(ctx context.Context, jobID int64, reason string) (Job, error) {
	return c.Ops().Cancel(ctx, jobID, reason)
}

// Replay moved to package client/ops.
//
// Deprecated: use ops.Client.Replay.
func (c *Client) Replay(ctx context.Context, jobID int64) (Job, error) {
	return c.Ops().Replay(ctx, jobID)
}

// Prune moved to package client/ops.
//
// Deprecated: use ops.Client.Prune.
func (c *Client) Prune(ctx context.Context, olderThan time.Duration, limit int) (int, error) {
	return c.Ops().Prune(ctx, olderThan, limit)
}

// Queues moved to package client/ops.
//
// Deprecated: use ops.Client.Queues.
func (c *Client) Queues(ctx context.Context) ([]QueueInfo, error) {
	return c.Ops().Queues(ctx)
}

// QueueNames moved to package client/ops.
//
// Deprecated: use ops.Client.QueueNames.
func (c *Client) QueueNames(ctx context.Context, limit int) (names []string, more bool, err error) {
	return c.Ops().QueueNames(ctx, limit)
}

// QueueEvents moved to package client/ops.
//
// Deprecated: use ops.Client.QueueEvents.
func (c *Client) QueueEvents(ctx context.Context, queue string, limit int) ([]QueueEvent, error) {
	return c.Ops().QueueEvents(ctx, queue, limit)
}

// PauseQueue moved to package client/ops.
//
// Deprecated: use ops.Client.PauseQueue.
func (c *Client) PauseQueue(ctx context.Context, queue string) (bool, error) {
	return c.Ops().PauseQueue(ctx, queue)
}

// ResumeQueue moved to package client/ops.
//
// Deprecated: use ops.Client.ResumeQueue.
func (c *Client) ResumeQueue(ctx context.Context, queue string) (bool, error) {
	return c.Ops().ResumeQueue(ctx, queue)
}

// SwitchQueue moved to package client/ops.
//
// Deprecated: use ops.Client.SwitchQueue.
func (c *Client) SwitchQueue(ctx context.Context, queue string, pause, create bool) (bool, error) {
	return c.Ops().SwitchQueue(ctx, queue, pause, create)
}

// Policies moved to package client/ops.
//
// Deprecated: use ops.Client.Policies.
func (c *Client) Policies(ctx context.Context) ([]policy.Policy, error) {
	return c.Ops().Policies(ctx)
}

// Overview moved to package client/ops.
//
// Deprecated: use ops.Client.Overview.
func (c *Client) Overview(ctx context.Context, exactLimit int) ([]QueueOverview, error) {
	return c.Ops().Overview(ctx, exactLimit)
}

// Stats moved to package client/ops.
//
// Deprecated: use ops.Client.Stats.
func (c *Client) Stats(ctx context.Context, window time.Duration) ([]QueueStats, error) {
	return c.Ops().Stats(ctx, window)
}

// Activity moved to package client/ops.
//
// Deprecated: use ops.Client.Activity.
func (c *Client) Activity(ctx context.Context, window, bucket time.Duration) ([]Activity, error) {
	return c.Ops().Activity(ctx, window, bucket)
}

// ActivitySince moved to package client/ops.
//
// Deprecated: use ops.Client.ActivitySince.
func (c *Client) ActivitySince(ctx context.Context, since time.Time, bucket time.Duration) ([]Activity, error) {
	return c.Ops().ActivitySince(ctx, since, bucket)
}

// Workers moved to package client/ops.
//
// Deprecated: use ops.Client.Workers.
func (c *Client) Workers(ctx context.Context) ([]WorkerInfo, error) {
	return c.Ops().Workers(ctx)
}

// Health moved to package client/ops.
//
// Deprecated: use ops.Client.Health.
func (c *Client) Health(ctx context.Context, maxAge time.Duration) (Health, error) {
	return c.Ops().Health(ctx, maxAge)
}
