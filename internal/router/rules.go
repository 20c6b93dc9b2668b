package router

// Kind says where a router function sends a call and how it merges the
// answers (docs/adr/0032-plproxy-router.md).
type Kind int

const (
	// ByQueue runs the call on the shard that holds the queue named by Arg.
	ByQueue Kind = iota + 1
	// ByQueueSplit splits the array arguments Split element by element by
	// the queue array Arg, runs each shard's part there and returns the
	// results in input order (bulk enqueue: one id per element).
	ByQueueSplit
	// ByJob runs the call on the shard encoded in the job id Arg.
	ByJob
	// ByJobSplit splits the array arguments Split by the job id array Arg;
	// the results of every shard are concatenated (a set, no order).
	ByJobSplit
	// AllUnion runs the call on every shard and returns every row.
	AllUnion
	// AllSum runs the call on every shard and returns the sum of the
	// scalar answers (counts: reap, prune).
	AllSum
	// AllMin runs the call on every shard and returns the smallest answer
	// (schema_version: what every shard supports).
	AllMin
	// AllOr runs the call on every shard and returns true when any shard
	// answered true (administrative writes to the replicated configuration:
	// pause_queue, grant_queue: "did this change anything").
	AllOr
	// Any runs the call on one shard (pure computations and reads of the
	// configuration, which every shard holds alike).
	Any
	// ByGraph runs a workflow (the jobs array Arg of enqueue_graph) on the
	// shard where its queues and the jobs it depends on live, and refuses
	// one that spans shards (0A000).
	ByGraph
)

// Rule routes one public function (every overload of its name).
type Rule struct {
	Kind Kind
	// Arg is the routing argument (ByQueue, ByQueueSplit, ByJob,
	// ByJobSplit); an overload that lacks it fails the install.
	Arg string
	// Split are the array arguments split alongside Arg (Arg included).
	Split []string
	// Create (AllOr with Arg a queue): the boolean argument that lets the
	// call create what it acts on. The call runs first, as given, on Arg's
	// shard, which refuses a queue it does not know; then on every shard
	// with Create true, so that the shards that do not hold the queue's
	// jobs get its row too. A queue is refused only when its own shard,
	// the one that holds its jobs and, like every shard, the configured
	// queues, does not know it.
	Create string
}

// Rules routes every public function of a shard's backoff schema, by name.
// A public function missing here makes Install fail: a function added to
// the shards must be routed on purpose (TestEveryFunctionRouted lists them).
var Rules = map[string][]Rule{
	"schema_version": {{Kind: AllMin}},

	// Producers.
	"enqueue": {
		{Kind: ByQueue, Arg: "p_queue"},
		{Kind: ByQueueSplit, Arg: "p_queues", Split: []string{
			"p_queues", "p_payloads", "p_run_ats", "p_max_attempts", "p_priorities", "p_dedupe_keys", "p_policies"}},
	},

	// A workflow's edges are rows of one shard: the whole graph goes to
	// the shard of its queues (and of the jobs it depends on); a graph
	// that spans shards is refused, naming each part's shard
	// (docs/workflows.md).
	"enqueue_graph": {{Kind: ByGraph, Arg: "p_jobs"}},

	// Workers.
	"claim":    {{Kind: ByQueue, Arg: "p_queue"}},
	"acquire":  {{Kind: ByJob, Arg: "p_job_id"}},
	"complete": {{Kind: ByJob, Arg: "p_job_id"}},
	// The outputs are split with the ids they belong to: each shard gets
	// its jobs' outputs, arrays of equal length.
	"complete_many": {{Kind: ByJobSplit, Arg: "p_job_ids", Split: []string{"p_job_ids", "p_attempts", "p_outputs"}}},
	"fail":          {{Kind: ByJob, Arg: "p_job_id"}},
	"heartbeat":     {{Kind: ByJob, Arg: "p_job_id"}},
	"snooze":        {{Kind: ByJob, Arg: "p_job_id"}},
	"job":           {{Kind: ByJob, Arg: "p_job_id"}},
	"reap":          {{Kind: AllSum}},
	// Each shard rotates its own segments (docs/adr/0061): one row each.
	"rotate": {{Kind: AllUnion}},
	// A worker's wake-up registration lives where its queue's jobs are
	// (enqueue reads it there); NOTIFY itself does not cross the router.
	"wait_for_jobs": {{Kind: ByQueue, Arg: "p_queue"}},
	"stop_waiting":  {{Kind: ByQueue, Arg: "p_queue"}},
	// An idle worker's one look (docs/adr/0083): each shard answers for
	// its part of the queues, its schedules, leases and segments, and
	// renews the registrations it holds; the worker takes the earliest
	// time of each kind and queue.
	"next_work": {{Kind: AllUnion}},

	// Operators.
	"cancel": {{Kind: ByJob, Arg: "p_job_id"}},
	"replay": {{Kind: ByJob, Arg: "p_job_id"}},
	// Workflows (docs/adr/0087): by the job, whose shard holds its edges
	// and outputs.
	"unblock":        {{Kind: ByJob, Arg: "p_job_id"}},
	"job_output":     {{Kind: ByJob, Arg: "p_job_id"}},
	"parent_outputs": {{Kind: ByJob, Arg: "p_job_id"}},
	// Registered on the job's shard, whose finishing call notifies; the
	// notification does not cross the router, so a client there polls.
	"await_job":     {{Kind: ByJob, Arg: "p_job_id"}},
	"stop_awaiting": {{Kind: ByJob, Arg: "p_job_id"}},
	// A queue's dead letters live on the queue's shard.
	"replay_dead_letters": {{Kind: ByQueue, Arg: "p_queue"}},
	// A filter may span queues: every shard acts on its own matches.
	"bulk_jobs": {{Kind: AllUnion}},
	// A pure computation.
	"error_signature": {{Kind: Any}},
	"prune":           {{Kind: AllSum}},
	"stats":           {{Kind: AllUnion}},
	// Each shard counts its own queues; the client adds up the rows of a
	// queue configured on every shard (ops.Client.Overview).
	"overview": {{Kind: AllUnion}},
	"activity": {{Kind: AllUnion}},
	// Each shard knows the workers holding its jobs: one row per shard.
	"workers": {{Kind: AllUnion}},
	// Each shard has its own vacuum horizon: one row per shard.
	"health": {{Kind: AllUnion}},
	// Each shard has its own maintenance and workers: one row per shard.
	"liveness": {{Kind: AllUnion}},
	// Each shard answers for its part of the queues; any row means busy.
	"unfinished_job": {{Kind: AllUnion}},
	// Each shard lists its queues; the client merges a queue configured on
	// every shard (as for overview).
	"queue_list": {{Kind: AllUnion}},
	// Operator reads of jobs (docs/adr/0072): each shard answers for its
	// own jobs and the client merges the rows (a page: sorted by its
	// order and cut at its limit; groups of one key: added up).
	"list_jobs":           {{Kind: AllUnion}},
	"count_jobs":          {{Kind: AllSum}},
	"job_detail":          {{Kind: ByJob, Arg: "p_job_id"}},
	"job_graph":           {{Kind: ByJob, Arg: "p_job_id"}},
	"dead_letter_groups":  {{Kind: AllUnion}},
	"dead_letter_reasons": {{Kind: AllUnion}},
	"dead_letter_sample":  {{Kind: AllUnion}},
	// Reads of the configuration and its history, which every shard holds
	// alike (pause_queue writes the event on every shard).
	"policy_list":   {{Kind: Any}},
	"queue_history": {{Kind: Any}},
	// A queue's controls and their runtime state live on the queue's shard
	// (each shard runs its own breaker and bucket for its part of a queue).
	"queue_state": {{Kind: ByQueue, Arg: "p_queue"}},

	// Administrative writes to the configuration every shard holds alike
	// (backoff.queues, backoff.queue_grants): every shard, so that the rows
	// stay equal (a shard that missed one shows in config diff).
	"pause_queue":  {{Kind: AllOr, Arg: "p_queue", Create: "p_create"}},
	"resume_queue": {{Kind: AllOr}},
	"grant_queue":  {{Kind: AllOr}},
	"revoke_queue": {{Kind: AllOr}},

	// Periodic jobs (docs/adr/0063): a schedule lives on the shard of its
	// queue, beside its jobs, so that the shard's unique index on the
	// job's schedule and slot sees every job of it: put routes by queue,
	// a change by name goes to every shard (only the holder answers
	// true), and every shard fires its own schedules.
	"put_schedule":    {{Kind: ByQueue, Arg: "p_queue"}},
	"pause_schedule":  {{Kind: AllOr}},
	"resume_schedule": {{Kind: AllOr}},
	"drop_schedule":   {{Kind: AllOr}},
	"fire_schedules":  {{Kind: AllUnion}},
	// Only the shard that holds the schedule returns a row.
	"trigger_schedule": {{Kind: AllUnion}},
	// By name: the holder's rows; of an expression: a computation.
	"schedule_fires": {{Kind: AllUnion, Arg: "p_name"}, {Kind: Any}},
	// Operator reads (docs/adr/0072): each shard answers for the
	// schedules it holds, and the client merges the rows by name.
	"upcoming_fires": {{Kind: AllUnion}},
	"schedule_list":  {{Kind: AllUnion}},

	// Computations and configuration reads: any shard answers alike.
	"retry_delay":                    {{Kind: Any}},
	"compute_delay":                  {{Kind: Any}},
	"schedule":                       {{Kind: Any}},
	"calculate_step_next_retry_time": {{Kind: Any}},
	"job_policy":                     {{Kind: Any}},
}

// TableKind says where a router view over a shard table reads.
type TableKind int

const (
	// TableAll reads every shard's rows (jobs: each shard holds its own).
	TableAll TableKind = iota + 1
	// TableReplicated reads shard 0: the configuration tables hold the same
	// rows on every shard (config apply writes them all; config diff shows
	// a shard that drifted).
	TableReplicated
)

// Tables routes the reads of every table of a shard's backoff schema
// (except tern's version table), which the router serves as read-only
// views. A table missing here makes Install fail.
var Tables = map[string]TableKind{
	"jobs":         TableAll,
	"policies":     TableReplicated,
	"queues":       TableReplicated,
	"settings":     TableReplicated,
	"queue_grants": TableReplicated,
	// Pauses and resumes: written on every shard with the configuration.
	"queue_events": TableReplicated,
	// Wake-up registrations: each shard holds those of its queues.
	"waiting_workers": TableAll,
	// Runtime state of queue controls: each shard holds its queues'.
	"queue_failures": TableAll,
	"queue_breakers": TableAll,
	"queue_tokens":   TableAll,
	// Schedules: each shard holds those of its queues (docs/adr/0063).
	"schedules": TableAll,
	// Storage of the jobs (docs/adr/0061): each shard rotates its own
	// segments and holds the dedupe keys of its queues. A partition of
	// backoff.jobs is read through it, not routed.
	"segments":    TableAll,
	"dedupe_keys": TableAll,
	// When each shard's maintenance last ran and the workers that named
	// themselves to its rotate (docs/adr/0079).
	"maintenance":         TableAll,
	"maintenance_workers": TableAll,
	// Workflows (docs/adr/0087): each shard holds its jobs' edges,
	// counters, outputs and progress.
	"job_dependencies": TableAll,
	"job_blockers":     TableAll,
	"job_outputs":      TableAll,
	"job_progress":     TableAll,
	"job_awaiters":     TableAll,
	// Queues moving between shards (docs/adr/0092): each shard holds its
	// own marks and the old ids of the jobs copied to it.
	"queue_moves": TableAll,
	"moved_jobs":  TableAll,
}
