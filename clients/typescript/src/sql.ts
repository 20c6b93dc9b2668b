// The typed calls of the SQL API. Each method is one call of one backoff.*
// function: the package never reads or writes backoff.jobs itself, never
// decides a retry and never computes a delay (docs/adr/0064).

import { hostname } from "node:os";
import { randomBytes } from "node:crypto";

import type pg from "pg";

import { BackoffError, InvalidArgumentError, SchemaTooOldError, WaitTimeoutError, sqlState, translate } from "./errors.js";
import { sleep } from "./sleep.js";
import { READ_DEFAULT_LEVEL, isPool, readCommitted } from "./isolation.js";
import { retryWhileMoving } from "./moving.js";
import type {
  AttemptError,
  ClientOptions,
  EnqueueOptions,
  FailOptions,
  FinishedJob,
  GraphJob,
  Job,
  JobId,
  Logger,
  NewJob,
  OnFailure,
  ParentOutput,
  Queryable,
  QueueState,
  QueueStats,
  ReplayOutcome,
  ScheduleFire,
  Status,
  WaitOptions,
} from "./types.js";

/** The channel a call that finishes an awaited job notifies, with its id (backoff.await_job). */
export const FINISHED_CHANNEL = "backoff_finished";

/**
 * The schema version this package needs (backoff.schema_version()); a
 * newer schema is accepted, since migrations only add.
 */
export const REQUIRED_SCHEMA = 5;

/** The columns of backoff.jobs a call returning jobs selects, by name, so a later column breaks nothing. */
const JOB_COLUMNS =
  "id, queue, payload, status, priority, attempts, uncounted_attempts, max_attempts, policy, run_at, " +
  "lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors, dead_letter_reason, " +
  "dedupe_key, lease_expiries, created_at, completed_at";

/** One named argument: p_name => $n::cast. Named, so calls stay right when a function gains optional parameters. */
type Arg = [name: string, cast: string, value: unknown];

/**
 * Client is the typed API over the backoff schema's SQL functions. Make
 * one with Client.connect, which checks the schema once; `with(tx)` runs
 * calls on a transaction's client without checking again.
 */
export class Client {
  readonly workerId: string;
  readonly logger: Logger;
  private readonly now: (() => Date) | undefined;
  /**
   * Over a pool: whether its sessions start at another level than READ
   * COMMITTED, so that each call runs in a READ COMMITTED transaction of
   * its own (isolation.ts); read with the schema check, or at the first
   * call. Undefined: not read yet.
   */
  private otherLevel: boolean | Promise<boolean> | undefined;

  private constructor(
    private readonly db: Queryable,
    opts: ClientOptions,
  ) {
    this.now = opts.now;
    this.workerId = opts.workerId ?? defaultWorkerId();
    this.logger = opts.logger ?? consoleLogger;
  }

  /**
   * connect returns a client over db (a pg.Pool, or a connected client)
   * after checking that its pgbackoff schema is at least REQUIRED_SCHEMA;
   * a missing or older schema is a SchemaTooOldError.
   */
  static async connect(db: Queryable, opts: ClientOptions = {}): Promise<Client> {
    const c = new Client(db, opts);
    let have: number | null;
    try {
      // Over a pool, the level its sessions start at comes in the same statement.
      const pool = isPool(db);
      const rows = await c.runAsIs(
        "check pgbackoff schema",
        `SELECT backoff.schema_version() AS v${pool ? `, ${READ_DEFAULT_LEVEL} AS level` : ""}`,
        [],
      );
      if (pool) c.otherLevel = rows[0]?.level !== "read committed";
      have = version(rows);
    } catch (err) {
      const code = sqlState(err instanceof BackoffError ? err.cause : err);
      // invalid_schema_name, undefined_function, undefined_table: not installed.
      if (code === "3F000" || code === "42883" || code === "42P01") {
        throw new SchemaTooOldError(
          `check pgbackoff schema: it is not installed (need version ${REQUIRED_SCHEMA}): run \`backoffctl migrate up\``,
          { cause: err, code },
        );
      }
      throw err;
    }
    if (have === null || have < REQUIRED_SCHEMA) {
      throw new SchemaTooOldError(
        `check pgbackoff schema: the database is at version ${have ?? 0}, this package needs ${REQUIRED_SCHEMA}: run \`backoffctl migrate up\``,
      );
    }
    return c;
  }

  /**
   * with returns a client that runs its calls on db, typically a
   * pg.PoolClient inside BEGIN ... COMMIT, so that an enqueue commits or
   * rolls back with the caller's own writes. Options are shared.
   */
  with(db: Queryable): Client {
    const c = new Client(db, { now: this.now, workerId: this.workerId, logger: this.logger });
    if (db === this.db) c.otherLevel = this.otherLevel;
    return c;
  }

  /** clock is the client's notion of now: the injected clock, else the host's. */
  clock(): Date {
    return this.now?.() ?? new Date();
  }

  /** The migration version installed (backoff.schema_version()). */
  async schemaVersion(): Promise<number | null> {
    return version(await this.run("check pgbackoff schema", "SELECT backoff.schema_version() AS v", []));
  }

  /**
   * enqueue adds a job to queue and returns its id (the existing job's id
   * when dedupeKey matches an unfinished job of the queue). On a pool, an
   * enqueue refused because the queue is moving to another shard
   * (QueueMovingError) is tried again for up to 10 s; the same holds for
   * enqueueMany and enqueueGraph.
   */
  async enqueue<T>(queue: string, payload?: T, opts: EnqueueOptions = {}): Promise<JobId> {
    const op = `enqueue job in ${JSON.stringify(queue)}`;
    const [sql, values] = this.fn("enqueue", [
      ["p_queue", "text", queue],
      ["p_payload", "jsonb", encodePayload(op, payload)],
      ["p_run_at", "timestamptz", opts.runAt ?? null],
      ["p_max_attempts", "integer", opts.maxAttempts ?? null],
      ["p_priority", "integer", opts.priority ?? null],
      ["p_dedupe_key", "text", opts.dedupeKey ?? null],
      ["p_policy", "text", opts.policy ?? null],
    ]);
    const rows = await this.enqueueRun(op, `SELECT ${sql} AS id`, values);
    return String(rows[0]?.id);
  }

  /**
   * enqueueMany adds jobs in one statement (the bulk form of
   * backoff.enqueue: each job gets exactly the single-job semantics, dedupe
   * included) and returns their ids in input order. Atomic: on error no job
   * is added.
   */
  async enqueueMany<T>(jobs: NewJob<T>[]): Promise<JobId[]> {
    const op = `enqueue ${jobs.length} jobs`;
    if (jobs.length === 0) return [];
    const [sql, values] = this.fn("enqueue", [
      ["p_queues", "text[]", jobs.map((j) => j.queue)],
      ["p_payloads", "jsonb[]", jobs.map((j, i) => encodePayload(`${op}: job ${i}`, j.payload))],
      ["p_run_ats", "timestamptz[]", jobs.map((j) => j.runAt ?? null)],
      ["p_max_attempts", "integer[]", jobs.map((j) => j.maxAttempts ?? null)],
      ["p_priorities", "integer[]", jobs.map((j) => j.priority ?? null)],
      ["p_dedupe_keys", "text[]", jobs.map((j) => j.dedupeKey ?? null)],
      ["p_policies", "text[]", jobs.map((j) => j.policy ?? null)],
    ]);
    const rows = await this.enqueueRun(op, `SELECT id FROM ${sql} AS t(id)`, values);
    return rows.map((r) => String(r.id));
  }

  /**
   * claim takes up to limit due jobs of queue for this client's worker id:
   * each comes back running, its attempt counted, with a lease of leaseMs
   * (undefined: the policy's lease). Higher priority first, then earliest
   * run_at. Fewer (or none) when the queue's controls hold it back.
   */
  async claim<T = unknown>(queue: string, limit = 1, leaseMs?: number): Promise<Job<T>[]> {
    const op = `claim jobs in ${JSON.stringify(queue)}`;
    const [sql, values] = this.fn("claim", [
      ["p_queue", "text", queue],
      ["p_worker", "text", this.workerId],
      ["p_limit", "integer", limit],
      ["p_lease", "interval", interval(op, leaseMs)],
    ]);
    return (await this.run(op, `SELECT ${JOB_COLUMNS} FROM ${sql}`, values)).map((r) => toJob<T>(r));
  }

  /**
   * acquire claims one job by id if it is due, as claim would. Not due
   * yet: NotReadyError (with retryAt); running: StaleAttemptError;
   * finished: InvalidTransitionError; unknown: JobNotFoundError.
   */
  async acquire<T = unknown>(jobId: JobId, leaseMs?: number): Promise<Job<T>> {
    const op = `acquire job ${jobId}`;
    const [sql, values] = this.fn("acquire", [
      ["p_job_id", "bigint", jobId],
      ["p_worker", "text", this.workerId],
      ["p_lease", "interval", interval(op, leaseMs)],
    ]);
    return this.oneJob<T>(op, sql, values);
  }

  /**
   * enqueueGraph enqueues every job of a graph in one call and one
   * transaction (backoff.enqueue_graph) and returns each job's id by its
   * ref. A job with a parent that has not completed is blocked until its
   * last parent completes. Cycles, self-dependencies and unknown refs or
   * ids are refused (InvalidArgumentError, naming them), and nothing is
   * enqueued.
   */
  async enqueueGraph<T>(jobs: GraphJob<T>[]): Promise<Record<string, JobId>> {
    const op = `enqueue a graph of ${jobs.length} jobs`;
    const docs = jobs.map((j) => {
      const d: Record<string, unknown> = { ref: j.ref, queue: j.queue, payload: j.payload ?? {} };
      if (j.runAt !== undefined) d.run_at = j.runAt.toISOString();
      if (j.maxAttempts !== undefined) d.max_attempts = j.maxAttempts;
      if (j.priority !== undefined) d.priority = j.priority;
      if (j.dedupeKey !== undefined) d.dedupe_key = j.dedupeKey;
      if (j.policy !== undefined) d.policy = j.policy;
      if (j.dependsOn !== undefined && j.dependsOn.length > 0) {
        d.depends_on = j.dependsOn.map((dep) => {
          if (typeof dep === "string") return dep;
          const e: Record<string, unknown> = "ref" in dep ? { ref: dep.ref } : { job: String(dep.job) };
          if (dep.onFailure !== undefined) e.on_failure = dep.onFailure;
          return e;
        });
      }
      return d;
    });
    const [sql, values] = this.fn("enqueue_graph", [["p_jobs", "jsonb", encodeJSON(op, docs)]]);
    const rows = await this.enqueueRun(op, `SELECT ref, job_id FROM ${sql}`, values);
    return Object.fromEntries(rows.map((r) => [r.ref as string, String(r.job_id)]));
  }

  /**
   * completeWithOutput completes the running attempt as complete does and
   * records output (any JSON value; a RawJSON as it is) as the job's
   * result, which jobOutput and its dependents' parentOutputs read. An
   * output over the queue's max_output_bytes is refused
   * (InvalidArgumentError) and the job stays running.
   */
  async completeWithOutput(jobId: JobId, attempt: number, output: unknown): Promise<Job> {
    const op = `complete job ${jobId} (attempt ${attempt})`;
    const [sql, values] = this.fn("complete", [
      ["p_job_id", "bigint", jobId],
      ["p_attempt", "integer", attempt],
      ["p_output", "jsonb", encodeJSON(`${op}: output`, output)],
    ]);
    return this.oneJob(op, sql, values);
  }

  /** jobOutput returns the output a job recorded when it completed; undefined when it recorded none or has not completed. */
  async jobOutput(jobId: JobId): Promise<unknown> {
    const op = `read the output of job ${jobId}`;
    const rows = await this.run(op, "SELECT backoff.job_output(p_job_id => $1::bigint) AS output", [jobId]);
    return rows[0]?.output ?? undefined;
  }

  /**
   * parentOutputs returns, in one call, the jobs jobId depends on with
   * their status and output, in id order; none for a job without
   * dependencies.
   */
  async parentOutputs(jobId: JobId): Promise<ParentOutput[]> {
    const op = `read the parents of job ${jobId}`;
    const rows = await this.run(
      op,
      "SELECT parent_id, queue, status, on_failure, output FROM backoff.parent_outputs(p_job_id => $1::bigint)",
      [jobId],
    );
    return rows.map((r) => ({
      parentId: String(r.parent_id),
      queue: r.queue ?? null,
      status: (r.status ?? null) as Status | null,
      onFailure: r.on_failure as OnFailure,
      output: r.output ?? undefined,
    }));
  }

  /**
   * heartbeatProgress extends the lease as heartbeat does and records
   * progress (any JSON value, at most 8 KiB) as the job's progress, which
   * backoff.job_detail and `backoffctl jobs show` display.
   */
  async heartbeatProgress(jobId: JobId, attempt: number, progress: unknown, extendMs?: number): Promise<Date> {
    const op = `heartbeat job ${jobId} (attempt ${attempt})`;
    const [sql, values] = this.fn("heartbeat", [
      ["p_job_id", "bigint", jobId],
      ["p_attempt", "integer", attempt],
      ["p_extend", "interval", interval(op, extendMs)],
      ["p_progress", "jsonb", encodeJSON(`${op}: progress`, progress)],
    ]);
    return (await this.run(op, `SELECT ${sql} AS until`, values))[0]?.until as Date;
  }

  /**
   * waitForOutput waits until the job has finished (completed,
   * dead-lettered or cancelled) and returns how it ended with its output.
   * It registers with backoff.await_job, so that the call that finishes
   * the job notifies channel backoff_finished: over a pg.Pool it LISTENs on
   * a client of the pool for the wait (its calls take another) and
   * resolves as soon as the job finishes, and looks at the job every pollIntervalMs in case a
   * notification is missed; on a client it polls. WaitTimeoutError after
   * timeoutMs; JobNotFoundError for a job that does not exist (or of a
   * queue the caller may not read).
   */
  async waitForOutput(jobId: JobId, opts: WaitOptions = {}): Promise<FinishedJob> {
    const op = `wait for the output of job ${jobId}`;
    const timeoutMs = opts.timeoutMs ?? 60_000;
    const pollMs = opts.pollIntervalMs ?? 1000;
    const deadline = Date.now() + timeoutMs;
    const ttl = interval(op, Math.max(60_000, 3 * pollMs));
    const db = this.db;
    let listener: pg.PoolClient | undefined;
    let wake: (() => void) | undefined;
    let registered = false;
    try {
      if (isPool(db)) {
        listener = await db.connect();
        // A connection that breaks while it listens leaves the wait to its polls.
        listener.on("error", () => {});
        listener.on("notification", (msg) => {
          if (msg.channel === FINISHED_CHANNEL && msg.payload === String(jobId)) wake?.();
        });
        await listener.query(`LISTEN ${FINISHED_CHANNEL}`);
      }
      for (;;) {
        opts.signal?.throwIfAborted();
        const rows = await this.run(
          op,
          "SELECT backoff.await_job(p_job_id => $1::bigint, p_awaiter => $2::text, p_ttl => $3::interval) AS status",
          [jobId, this.workerId, ttl],
        );
        const status = rows[0]?.status as Status;
        if (status === "completed" || status === "dead_lettered" || status === "cancelled") {
          return { id: String(jobId), status, output: await this.jobOutput(jobId) };
        }
        registered = true;
        const left = deadline - Date.now();
        if (left <= 0) throw new WaitTimeoutError(`${op}: not finished after ${timeoutMs}ms`);
        const woken = new AbortController();
        wake = () => woken.abort();
        const stop = () => woken.abort();
        opts.signal?.addEventListener("abort", stop, { once: true });
        await sleep(Math.min(pollMs, left), woken.signal);
        opts.signal?.removeEventListener("abort", stop);
        wake = undefined;
      }
    } catch (err) {
      if (registered) {
        await this.run(`stop waiting for job ${jobId}`, "SELECT backoff.stop_awaiting(p_job_id => $1::bigint, p_awaiter => $2::text)", [
          jobId,
          this.workerId,
        ]).catch(() => {});
      }
      throw err;
    } finally {
      if (listener !== undefined) {
        const l = listener;
        // Back to the pool only once it no longer listens.
        await l.query(`UNLISTEN ${FINISHED_CHANNEL}`).then(
          () => l.release(),
          (err: Error) => l.release(err),
        );
      }
    }
  }

  /** complete marks running attempt `attempt` of a job completed. */
  async complete(jobId: JobId, attempt: number): Promise<Job> {
    const op = `complete job ${jobId} (attempt ${attempt})`;
    const [sql, values] = this.fn("complete", [
      ["p_job_id", "bigint", jobId],
      ["p_attempt", "integer", attempt],
    ]);
    return this.oneJob(op, sql, values);
  }

  /**
   * completeMany completes, in one statement, each job still running its
   * given attempt (jobIds[i] with attempts[i]) and returns the ids it
   * completed; an entry whose token no longer holds its job is left alone.
   * outputs[i], unless undefined, is recorded as jobIds[i]'s output; one
   * over its queue's limit refuses the whole batch.
   */
  async completeMany(jobIds: JobId[], attempts: number[], outputs?: unknown[]): Promise<JobId[]> {
    const op = `complete ${jobIds.length} jobs`;
    if (jobIds.length !== attempts.length || (outputs !== undefined && outputs.length !== jobIds.length)) {
      throw new InvalidArgumentError(
        `${op}: ${jobIds.length} ids but ${attempts.length} attempts${outputs === undefined ? "" : ` and ${outputs.length} outputs`}`,
      );
    }
    if (jobIds.length === 0) return [];
    const args: Arg[] = [
      ["p_job_ids", "bigint[]", jobIds],
      ["p_attempts", "integer[]", attempts],
    ];
    if (outputs !== undefined && outputs.some((o) => o !== undefined)) {
      args.push(["p_outputs", "jsonb[]", outputs.map((o) => (o === undefined ? null : encodeJSON(`${op}: output`, o)))]);
    }
    const [sql, values] = this.fn("complete_many", args);
    return (await this.run(op, `SELECT id FROM ${sql} AS t(id)`, values)).map((r) => String(r.id));
  }

  /**
   * completedBy returns those of the jobs that their given attempt
   * (jobIds[i] with attempts[i]) completed: after a completion whose reply
   * was lost, whether it landed. A job completed with attempts equal to
   * the token was completed by that attempt and no other, since a token
   * never repeats (docs/adr/0020). Through backoff.job, which applies the
   * caller's queue scope.
   */
  async completedBy(jobIds: JobId[], attempts: number[]): Promise<JobId[]> {
    const op = `check ${jobIds.length} completions`;
    if (jobIds.length !== attempts.length) {
      throw new InvalidArgumentError(`${op}: ${jobIds.length} ids but ${attempts.length} attempts`);
    }
    if (jobIds.length === 0) return [];
    const rows = await this.run(
      op,
      "SELECT j.id FROM unnest($1::bigint[], $2::integer[]) AS t(id, attempt) " +
        "CROSS JOIN LATERAL backoff.job(p_job_id => t.id) AS j " +
        "WHERE j.attempts = t.attempt AND j.status = 'completed'",
      [jobIds, attempts],
    );
    return rows.map((r) => String(r.id));
  }

  /**
   * fail reports that running attempt `attempt` failed with `error`. The
   * database decides in one guarded update whether the job is retried
   * (retrying, at the policy's delay or retryIn) or dead-lettered; the
   * returned job says which.
   */
  async fail(jobId: JobId, attempt: number, error: string, opts: FailOptions = {}): Promise<Job> {
    const op = `fail job ${jobId} (attempt ${attempt})`;
    const [sql, values] = this.fn("fail", [
      ["p_job_id", "bigint", jobId],
      ["p_attempt", "integer", attempt],
      ["p_error", "text", cleanErrorText(error)],
      ["p_retry_in", "interval", interval(op, opts.retryInMs)],
      ["p_retryable", "boolean", opts.retryable ?? true],
    ]);
    return this.oneJob(op, sql, values);
  }

  /**
   * heartbeat extends the lease of a running attempt to now + extendMs
   * (undefined: the policy's lease) and returns the new lease_until. A
   * StaleAttemptError or InvalidTransitionError means the job is no longer
   * this attempt's: stop working on it.
   */
  async heartbeat(jobId: JobId, attempt: number, extendMs?: number): Promise<Date> {
    const op = `heartbeat job ${jobId} (attempt ${attempt})`;
    const [sql, values] = this.fn("heartbeat", [
      ["p_job_id", "bigint", jobId],
      ["p_attempt", "integer", attempt],
      ["p_extend", "interval", interval(op, extendMs)],
    ]);
    return (await this.run(op, `SELECT ${sql} AS until`, values))[0]?.until as Date;
  }

  /**
   * snooze puts a running attempt back to pending, due after delayMs,
   * without spending an attempt: countedAttempt goes back by one, while the
   * token stays spent, so a repeated snooze with it is refused.
   */
  async snooze(jobId: JobId, attempt: number, delayMs: number): Promise<Job> {
    const op = `snooze job ${jobId} (attempt ${attempt})`;
    const [sql, values] = this.fn("snooze", [
      ["p_job_id", "bigint", jobId],
      ["p_attempt", "integer", attempt],
      ["p_delay", "interval", interval(op, delayMs)],
    ]);
    return this.oneJob(op, sql, values);
  }

  /** cancel moves an unfinished job to the terminal status cancelled. */
  async cancel(jobId: JobId, reason?: string): Promise<Job> {
    const op = `cancel job ${jobId}`;
    const [sql, values] = this.fn("cancel", [
      ["p_job_id", "bigint", jobId],
      ["p_reason", "text", reason === undefined ? null : cleanErrorText(reason)],
    ]);
    return this.oneJob(op, sql, values);
  }

  /**
   * replay brings a dead-lettered or cancelled job back to pending with a
   * fresh budget (countedAttempt 0); its history is kept, and its token
   * keeps counting.
   */
  async replay(jobId: JobId): Promise<Job> {
    const op = `replay job ${jobId}`;
    const [sql, values] = this.fn("replay", [["p_job_id", "bigint", jobId]]);
    return this.oneJob(op, sql, values);
  }

  /**
   * replayDeadLetters replays every dead letter of queue in one statement
   * and says, per job in id order, whether it was replayed or why not.
   */
  async replayDeadLetters(queue: string): Promise<ReplayOutcome[]> {
    const op = `replay dead letters of queue ${JSON.stringify(queue)}`;
    const [sql, values] = this.fn("replay_dead_letters", [["p_queue", "text", queue]]);
    const rows = await this.run(op, `SELECT job_id, replayed, reason FROM ${sql}`, values);
    return rows.map((r) => ({ jobId: String(r.job_id), replayed: r.replayed as boolean, reason: r.reason ?? null }));
  }

  /**
   * reap sends up to limit (undefined: the function's default) running jobs
   * whose lease expired through the same decision as fail and returns how
   * many it moved. Safe from many workers at once.
   */
  async reap(limit?: number): Promise<number> {
    const args: Arg[] = limit === undefined ? [] : [["p_limit", "integer", limit]];
    const [sql, values] = this.fn("reap", args);
    return Number((await this.run("reap expired leases", `SELECT ${sql} AS n`, values))[0]?.n);
  }

  /**
   * rotate maintains the segments the live jobs are stored in
   * (backoff.rotate, docs/adr/0061) and returns the rows it moved. The
   * worker calls it with every reap, naming itself (worker):
   * backoff.liveness then counts it among the workers seen, busy or idle
   * (docs/adr/0079).
   */
  async rotate(worker?: string): Promise<number> {
    const args: Arg[] = worker === undefined ? [] : [["p_worker", "text", worker]];
    const [sql, values] = this.fn("rotate", args);
    return Number((await this.run("rotate the job segments", `SELECT coalesce(sum(moved), 0)::bigint AS n FROM ${sql}`, values))[0]?.n);
  }

  /**
   * fireSchedules enqueues one job for every schedule slot due now, at most
   * limit (undefined: the function's default, 1000) in one call, and returns
   * them (backoff.fire_schedules, docs/schedules.md). Any number of callers
   * may run it at once: a slot is enqueued once. With nothing due it is one
   * index probe. The worker calls it every scheduleIntervalMs.
   */
  async fireSchedules(limit?: number): Promise<ScheduleFire[]> {
    const args: Arg[] = limit === undefined ? [] : [["p_limit", "integer", limit]];
    const [sql, values] = this.fn("fire_schedules", args);
    const rows = await this.run("fire schedules", `SELECT schedule, slot, job_id FROM ${sql}`, values);
    return rows.map((r) => ({ schedule: r.schedule as string, slot: r.slot as Date, jobId: String(r.job_id) }));
  }

  /** prune deletes up to limit finished jobs older than olderThanMs and returns how many. */
  async prune(olderThanMs: number, limit?: number): Promise<number> {
    const op = `prune jobs older than ${olderThanMs}ms`;
    const args: Arg[] = [["p_older_than", "interval", interval(op, olderThanMs)]];
    if (limit !== undefined) args.push(["p_limit", "integer", limit]);
    const [sql, values] = this.fn("prune", args);
    return Number((await this.run(op, `SELECT ${sql} AS n`, values))[0]?.n);
  }

  /**
   * stats returns backoff.stats: per queue, jobs by status, the due backlog
   * and its age, and the retries and dead letters of the last windowMs
   * (undefined: one hour). It scans the table: for operators, not loops.
   */
  async stats(windowMs?: number): Promise<QueueStats[]> {
    const op = "read job stats";
    const args: Arg[] = windowMs === undefined ? [] : [["p_window", "interval", interval(op, windowMs)]];
    const [sql, values] = this.fn("stats", args);
    const rows = await this.run(
      op,
      "SELECT queue, pending, running, retrying, completed, dead_lettered, cancelled, due, " +
        `coalesce(extract(epoch FROM oldest_due_age) * 1000, 0)::float8 AS oldest_due_ms, retries, dead_letters, ` +
        `expired, paused, blocked FROM ${sql}`,
      values,
    );
    return rows.map((r) => ({
      queue: r.queue,
      pending: Number(r.pending),
      running: Number(r.running),
      retrying: Number(r.retrying),
      completed: Number(r.completed),
      deadLettered: Number(r.dead_lettered),
      cancelled: Number(r.cancelled),
      due: Number(r.due),
      oldestDueAgeMs: Number(r.oldest_due_ms),
      retries: Number(r.retries),
      deadLetters: Number(r.dead_letters),
      expired: Number(r.expired),
      paused: r.paused === true,
      blocked: Number(r.blocked),
    }));
  }

  /**
   * queueState reads the live state of queue's breaker and rate limit at
   * the client's time: nextClaimAt says when a claim can next return a job.
   */
  async queueState(queue: string): Promise<QueueState> {
    const op = `read state of queue ${JSON.stringify(queue)}`;
    const [sql, values] = this.fn("queue_state", [["p_queue", "text", queue]]);
    // The time the state was read at comes back beside it, so a caller
    // measures the wait on the database's clock, not its own.
    const rows = await this.run(
      op,
      "SELECT queue, state, opened_at, failures, probes_left, rate, burst, tokens, next_claim_at, " +
        `coalesce($${values.length}::timestamptz, now()) AS read_at FROM ${sql}`,
      values,
    );
    const r = rows[0] ?? {};
    return {
      queue: r.queue,
      state: r.state,
      openedAt: r.opened_at ?? null,
      failures: Number(r.failures ?? 0),
      probesLeft: r.probes_left ?? null,
      rate: r.rate ?? null,
      burst: r.burst ?? null,
      tokens: r.tokens ?? null,
      nextClaimAt: r.next_claim_at ?? null,
      readAt: r.read_at,
    };
  }

  /** pauseQueue stops claims of queue; it reports whether the queue was running. */
  async pauseQueue(queue: string): Promise<boolean> {
    const op = `pause queue ${JSON.stringify(queue)}`;
    return (await this.run(op, "SELECT backoff.pause_queue(p_queue => $1::text) AS changed", [queue]))[0]?.changed;
  }

  /** resumeQueue lets claims of queue start again; it reports whether the queue was paused. */
  async resumeQueue(queue: string): Promise<boolean> {
    const op = `resume queue ${JSON.stringify(queue)}`;
    return (await this.run(op, "SELECT backoff.resume_queue(p_queue => $1::text) AS changed", [queue]))[0]?.changed;
  }

  /**
   * waitForJobs registers that this worker waits for queue for ttlMs: while
   * it does, enqueue notifies channel backoff_jobs when it adds a job due
   * now (docs/adr/0027). Returns the expiry.
   */
  async waitForJobs(queue: string, ttlMs: number): Promise<Date> {
    const op = `register waiting on ${JSON.stringify(queue)}`;
    return (
      await this.run(
        op,
        "SELECT backoff.wait_for_jobs(p_queue => $1::text, p_worker => $2::text, p_ttl => $3::interval) AS until",
        [queue, this.workerId, interval(op, ttlMs)],
      )
    )[0]?.until;
  }

  /**
   * nextWork is the idle worker's one look (backoff.next_work,
   * docs/adr/0083): for each kind of work (queue, one row per queue: a claim
   * can return a job; schedules; reap; rotate) whether it is due now, on
   * the clock the look used. With register, this worker's wake-up
   * registrations of the queues are renewed when they expire within a
   * third of ttlMs.
   */
  async nextWork(queues: string[], register: boolean, ttlMs: number): Promise<{ kind: string; queue: string; due: boolean }[]> {
    const op = `look for work in ${queues.length} idle queues`;
    const args: Arg[] = [["p_queues", "text[]", queues]];
    if (register) args.push(["p_worker", "text", this.workerId], ["p_ttl", "interval", interval(op, ttlMs)]);
    const [sql, values] = this.fn("next_work", args);
    // Due is decided against the time the look used (this clock, else the
    // database's): a skew between the two delays nothing.
    const rows = await this.run(
      op,
      `SELECT kind, coalesce(queue, '') AS queue, coalesce(at <= coalesce($${values.length}::timestamptz, statement_timestamp()), false) AS due FROM ${sql}`,
      values,
    );
    return rows.map((r) => ({ kind: r.kind, queue: r.queue, due: r.due === true }));
  }

  /** stopWaiting ends this worker's registration for queue; it reports whether one existed. */
  async stopWaiting(queue: string): Promise<boolean> {
    const op = `stop waiting on ${JSON.stringify(queue)}`;
    return (
      await this.run(op, "SELECT backoff.stop_waiting(p_queue => $1::text, p_worker => $2::text) AS ended", [
        queue,
        this.workerId,
      ])
    )[0]?.ended;
  }

  /**
   * fn builds "backoff.name(p_a => $1::t, ..., p_now => $n::timestamptz)":
   * p_now is always sent, the injected clock's time or NULL (the
   * database's clock), so each method sends one SQL text either way.
   */
  private fn(name: string, args: Arg[]): [string, unknown[]] {
    const all: Arg[] = [...args, ["p_now", "timestamptz", this.now?.() ?? null]];
    const params = all.map(([p, cast], i) => `${p} => $${i + 1}::${cast}`).join(", ");
    return [`backoff.${name}(${params})`, all.map(([, , v]) => v)];
  }

  private async oneJob<T = unknown>(op: string, call: string, values: unknown[]): Promise<Job<T>> {
    const rows = await this.run(op, `SELECT ${JOB_COLUMNS} FROM ${call}`, values);
    if (rows[0] === undefined) throw new BackoffError(`${op}: the function returned no row`);
    return toJob<T>(rows[0]);
  }

  /** run runs one statement at READ COMMITTED: as it is, or over a pool whose sessions start at another level, in a transaction of its own. */
  private async run(op: string, text: string, values: unknown[]): Promise<Record<string, any>[]> {
    const db = this.db;
    if (!isPool(db)) return this.runAsIs(op, text, values);
    try {
      let other = this.otherLevel;
      if (other === undefined) {
        other = this.otherLevel = db
          .query(`SELECT ${READ_DEFAULT_LEVEL} AS level`)
          .then((r) => (this.otherLevel = r.rows[0]?.level !== "read committed"));
        other.catch(() => (this.otherLevel = undefined));
      }
      if (!(await other)) return (await db.query(text, values)).rows;
      return (await readCommitted(db, text, values)).rows;
    } catch (err) {
      throw translate(op, err);
    }
  }

  /**
   * enqueueRun runs an enqueue; over a pool, again while the queue is
   * moving to another shard (moving.ts). On a transaction's client the
   * refusal has aborted the caller's transaction: it is thrown at once.
   */
  private async enqueueRun(op: string, text: string, values: unknown[]): Promise<Record<string, any>[]> {
    if (!isPool(this.db)) return this.run(op, text, values);
    return retryWhileMoving(() => this.run(op, text, values));
  }

  private async runAsIs(op: string, text: string, values: unknown[]): Promise<Record<string, any>[]> {
    try {
      return (await this.db.query(text, values)).rows;
    } catch (err) {
      throw translate(op, err);
    }
  }
}

/** version reads backoff.schema_version()'s row. */
function version(rows: Record<string, any>[]): number | null {
  const v = rows[0]?.v;
  return v === null || v === undefined ? null : Number(v);
}

/** interval sends a duration in milliseconds as an interval; undefined is NULL (the function's default). */
function interval(op: string, ms: number | undefined): string | null {
  if (ms === undefined) return null;
  if (!Number.isFinite(ms)) throw new InvalidArgumentError(`${op}: duration must be a finite number of milliseconds, got ${ms}`);
  return `${ms} milliseconds`;
}

/**
 * RawJSON is a JSON text sent as it is where an output or a progress is
 * taken (as Go's json.RawMessage): not encoded again.
 */
export class RawJSON {
  constructor(readonly text: string) {}
}

/** encodeJSON is value as JSON text (a RawJSON as it is); a value without a JSON form is an InvalidArgumentError naming op. */
export function encodeJSON(op: string, value: unknown): string {
  if (value instanceof RawJSON) return value.text;
  let text: string | undefined;
  try {
    text = JSON.stringify(value);
  } catch (err) {
    throw new InvalidArgumentError(`${op}: encode as JSON: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
  }
  if (text === undefined) throw new InvalidArgumentError(`${op}: ${String(value)} has no JSON form`);
  return text;
}

function encodePayload(op: string, payload: unknown): string {
  if (payload === undefined) return "{}";
  let text: string | undefined;
  try {
    text = JSON.stringify(payload);
  } catch (err) {
    throw new InvalidArgumentError(`${op}: encode payload: ${err instanceof Error ? err.message : String(err)}`, {
      cause: err,
    });
  }
  if (text === undefined) throw new InvalidArgumentError(`${op}: payload ${String(payload)} has no JSON form`);
  return text;
}

/** toJob reads a row of JOB_COLUMNS. */
export function toJob<T>(r: Record<string, any>): Job<T> {
  const attempt = Number(r.attempts);
  const uncounted = Number(r.uncounted_attempts);
  return {
    id: String(r.id),
    queue: r.queue,
    payload: r.payload as T,
    status: r.status as Status,
    priority: Number(r.priority),
    attempt,
    uncountedAttempts: uncounted,
    countedAttempt: attempt - uncounted,
    maxAttempts: r.max_attempts ?? null,
    policy: r.policy ?? null,
    runAt: r.run_at,
    leaseUntil: r.lease_until ?? null,
    lockedBy: r.locked_by ?? null,
    lastAttemptedAt: r.last_attempted_at ?? null,
    lastFailedAt: r.last_failed_at ?? null,
    lastError: r.last_error ?? null,
    errors: (r.errors ?? []) as AttemptError[],
    deadLetterReason: r.dead_letter_reason ?? null,
    dedupeKey: r.dedupe_key ?? null,
    leaseExpiries: Number(r.lease_expiries ?? 0),
    createdAt: r.created_at,
    completedAt: r.completed_at ?? null,
  };
}

/** The size, in bytes, at which the database cuts an error text. */
const MAX_ERROR_TEXT = 8192;

/**
 * cleanErrorText returns s as the database stores an error text: NUL
 * replaced by U+FFFD (PostgreSQL text cannot hold it and would refuse the
 * whole call, so the failure could not be recorded), and anything beyond
 * 8 KiB cut at a character boundary, ending with " [truncated: N bytes]",
 * so a huge error does not travel to the server.
 */
export function cleanErrorText(s: string): string {
  s = s.replaceAll("\u0000", "\ufffd");
  const bytes = Buffer.from(s, "utf8"); // a lone surrogate becomes U+FFFD here
  if (bytes.length <= MAX_ERROR_TEXT) return bytes.toString("utf8");
  let cut = 8150; // as the database: 8150 bytes of text, then the marker
  while (cut > 0 && ((bytes[cut] ?? 0) & 0xc0) === 0x80) cut--;
  return `${bytes.subarray(0, cut).toString("utf8")} [truncated: ${bytes.length} bytes]`;
}

function defaultWorkerId(): string {
  return `${hostname() || "worker"}-${process.pid}-${randomBytes(3).toString("hex")}`;
}

const consoleLogger: Logger = {
  debug() {},
  info() {},
  warn(message, fields) {
    console.warn(`pgbackoff: ${message}`, fields ?? "");
  },
  error(message, fields) {
    console.error(`pgbackoff: ${message}`, fields ?? "");
  },
};
