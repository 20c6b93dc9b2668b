// The shapes the package hands out and takes in. Durations are milliseconds
// (as setTimeout's), times are Dates, and job ids are strings: see
// docs/adr/0064-typescript-package.md for why.

import type pg from "pg";

/**
 * A job id: backoff.jobs.id, a bigint, as its decimal string. Ids are
 * opaque (a sharded install encodes the shard in them) and may exceed
 * Number.MAX_SAFE_INTEGER; a string is exact, is what node-postgres returns
 * for a bigint, and survives JSON.stringify, which a bigint does not.
 */
export type JobId = string;

/** A job's place in its life cycle (backoff.jobs.status). */
export type Status = "pending" | "running" | "retrying" | "completed" | "dead_lettered" | "cancelled" | "blocked";

/**
 * What runs a query: a pg.Pool, or a pg.PoolClient / pg.Client, which is
 * how a call joins the caller's transaction (BEGIN on that client first).
 */
export interface Queryable {
  query<R extends pg.QueryResultRow = any>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
}

/** One entry of a job's bounded error history (the 20 most recent). */
export interface AttemptError {
  /** The fencing token of the attempt that failed: unique per entry. */
  attempt: number;
  /** That attempt's place in the retry budget (absent before migration 4). */
  counted?: number;
  /** When it failed, as the database wrote it (ISO 8601). */
  at: string;
  error: string;
  worker?: string;
  /** "error" (reported by a handler) or "lease_expired" (reaped). */
  kind: string;
}

/**
 * A row of backoff.jobs as the SQL functions return it, with its payload
 * typed as T.
 *
 * Two numbers describe a job's attempts (docs/adr/0020): `attempt`, the
 * fencing token, counts every claim over the job's life and never goes
 * down; `countedAttempt` is the attempt's place in the retry budget, what
 * max_attempts bounds. A snooze and a replay give budget back, never
 * tokens.
 */
export interface Job<T = unknown> {
  id: JobId;
  queue: string;
  payload: T;
  status: Status;
  priority: number;
  /**
   * The fencing token (the attempts column): every claim of the job adds
   * one, nothing takes one off. Pass it to complete, fail, heartbeat and
   * snooze; a call with a token that no longer holds the job is refused
   * (StaleAttemptError or InvalidTransitionError).
   */
  attempt: number;
  /** Claims that do not count against max_attempts: snoozes, and every claim before a replay. */
  uncountedAttempts: number;
  /**
   * attempt - uncountedAttempts: 1 on the first try (and again on the first
   * try after a replay); equal to the max_attempts that applies on the last.
   */
  countedAttempt: number;
  /** The job's own max_attempts; null: its policy's. */
  maxAttempts: number | null;
  /** The policy the job recorded at enqueue; null: its queue's. */
  policy: string | null;
  runAt: Date;
  leaseUntil: Date | null;
  lockedBy: string | null;
  lastAttemptedAt: Date | null;
  lastFailedAt: Date | null;
  lastError: string | null;
  errors: AttemptError[];
  /** max_attempts, non_retryable, deadline or lease_expiries; null unless dead-lettered. */
  deadLetterReason: string | null;
  dedupeKey: string | null;
  /** How many of the job's leases expired and were reaped. */
  leaseExpiries: number;
  createdAt: Date;
  completedAt: Date | null;
}

/** The optional fields of a job to enqueue; absent means the function's default. */
export interface EnqueueOptions {
  /** The first run (default: now). */
  runAt?: Date;
  /** Overrides the policy's max_attempts for this job. */
  maxAttempts?: number;
  /** Higher is claimed first (default 0). */
  priority?: number;
  /**
   * While a job of the queue with this key is pending, running or
   * retrying, enqueue returns its id and adds nothing.
   */
  dedupeKey?: string;
  /** A row of backoff.policies for this job instead of its queue's. */
  policy?: string;
}

/** A job for enqueueMany. */
export interface NewJob<T = unknown> extends EnqueueOptions {
  queue: string;
  /** Sent with JSON.stringify; undefined means {}. */
  payload?: T;
}

/** How fail settles an attempt. */
export interface FailOptions {
  /**
   * The next attempt after this many milliseconds instead of the policy's
   * delay (an HTTP Retry-After, say); the database caps it at the policy's max.
   */
  retryInMs?: number;
  /** false: dead-letter now (reason non_retryable). Default true. */
  retryable?: boolean;
}

/** One queue's row of backoff.stats. */
export interface QueueStats {
  queue: string;
  pending: number;
  running: number;
  retrying: number;
  completed: number;
  deadLettered: number;
  cancelled: number;
  /** Pending or retrying jobs whose run_at has passed. */
  due: number;
  /** How long the oldest due job has waited, in ms; 0 when none is due. */
  oldestDueAgeMs: number;
  /** Failed attempts followed by a retry within the window. */
  retries: number;
  /** Jobs dead-lettered within the window. */
  deadLetters: number;
  /** Running jobs whose lease has ended: work a stopped worker stranded, until a reap settles it. */
  expired: number;
  /** Whether the queue is paused (backoff.pause_queue). */
  paused: boolean;
  /** Jobs waiting for the jobs they depend on (docs/workflows.md). */
  blocked: number;
}

/** The live state of a queue's controls (backoff.queue_state). */
export interface QueueState {
  queue: string;
  /** closed (also without a breaker), open or half_open. */
  state: "closed" | "open" | "half_open";
  openedAt: Date | null;
  failures: number;
  /** Half open: probe jobs claim still hands out; else null. */
  probesLeft: number | null;
  /** Jobs per second; null: no rate limit. */
  rate: number | null;
  burst: number | null;
  /** Tokens available now; null without a rate limit. */
  tokens: number | null;
  /** When a claim can next return a job; null when nothing holds claims back (paused too). */
  nextClaimAt: Date | null;
  /**
   * The time the state was read at (p_now, or the database's clock):
   * nextClaimAt - readAt is how long to wait, whatever the local clock says.
   */
  readAt: Date;
}

/** What replayDeadLetters did with one dead letter. */
export interface ReplayOutcome {
  jobId: JobId;
  replayed: boolean;
  /** Why a job was left dead-lettered (e.g. its dedupe key is taken); null when replayed. */
  reason: string | null;
}

/** One job backoff.fire_schedules enqueued for a due slot. */
export interface ScheduleFire {
  schedule: string;
  /** The slot it fired for (the job's run_at). */
  slot: Date;
  jobId: JobId;
}

/** Where the package writes what it does; fields are structured context. */
export interface Logger {
  debug(message: string, fields?: Record<string, unknown>): void;
  info(message: string, fields?: Record<string, unknown>): void;
  warn(message: string, fields?: Record<string, unknown>): void;
  error(message: string, fields?: Record<string, unknown>): void;
}

/** Options of a Client (and of a Worker, which makes one). */
export interface ClientOptions {
  /**
   * Pass p_now = now() on every call instead of the database's clock, so
   * tests and simulations drive time. Without it the database's clock
   * decides, so workers on many hosts agree. A caller outside
   * backoff_admin may pass only a time within max_clock_skew of the
   * database's clock, unless time injection is on (docs/adr/0035).
   */
  now?: () => Date;
  /** The name written into locked_by and the error history (default: host, pid and a random suffix). */
  workerId?: string;
  /** Default: warnings and errors on the console. */
  logger?: Logger;
}

/**
 * What a dependency does to its child when the parent ends without
 * completing (dead-lettered or cancelled): "cancel" the child (the
 * default), "run" it as if the parent had completed, or "wait" blocked for
 * an operator (backoff.unblock, or a replay of the parent).
 */
export type OnFailure = "cancel" | "run" | "wait";

/**
 * One parent of a graph's job: the ref of a job of the same graph, the id
 * of an existing job (a JobId string), or either with the policy for a
 * parent that fails.
 */
export type GraphDependency = string | { ref: string; onFailure?: OnFailure } | { job: JobId; onFailure?: OnFailure };

/** One job of a graph for enqueueGraph: a NewJob with a ref local to the graph and the jobs it depends on. */
export interface GraphJob<T = unknown> extends NewJob<T> {
  ref: string;
  dependsOn?: GraphDependency[];
}

/** How a job ended, as waitForOutput returns it. */
export interface FinishedJob {
  id: JobId;
  status: "completed" | "dead_lettered" | "cancelled";
  /** The output it recorded (any JSON value); undefined when it recorded none. */
  output: unknown;
}

/** waitForOutput's options. */
export interface WaitOptions {
  /** How long to wait, in ms (default 60000): then a WaitTimeoutError. */
  timeoutMs?: number;
  /** How often the job is looked at without a notification, in ms (default 1000). */
  pollIntervalMs?: number;
  /** Ends the wait early: the promise rejects with the signal's reason. */
  signal?: AbortSignal;
}

/** One job a job depends on, as the child sees it (backoff.parent_outputs). */
export interface ParentOutput {
  parentId: JobId;
  /** null when the parent was pruned. */
  queue: string | null;
  /** null when the parent was pruned. */
  status: Status | null;
  onFailure: OnFailure;
  /** The output it recorded (any JSON value); undefined when it recorded none. */
  output: unknown;
}
