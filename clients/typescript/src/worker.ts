// The Worker: configuration, run, the attempt of one job (lease,
// heartbeats, outcome) and the shutdown that ties the parts together. It
// follows the Go Worker (client/worker.go, executor.go, outcome.go;
// docs/adr/0026, 0028): producers claim (producer.ts), one completer
// batches completions (completer.ts), one LISTEN connection wakes idle
// queues (notifier.ts), and a reaper returns the jobs of crashed workers.

import type pg from "pg";

import { BATCHED_OUTPUT_BYTES, Completer, confirmCompletions } from "./completer.js";
import { InvalidArgumentError, InvalidTransitionError, JobNotFoundError, StaleAttemptError, sqlState, transient } from "./errors.js";
import { Notifier } from "./notifier.js";
import {
  LeaseExpiredError,
  LeaseLostError,
  PermanentError,
  WorkerShutdownError,
  errorText,
  readOutcome,
  type Outcome,
} from "./outcome.js";
import { Producer, type QueueSettings } from "./producer.js";
import { Shards } from "./sharding.js";
import { sleep } from "./sleep.js";
import { Client, RawJSON, encodeJSON } from "./sql.js";
import type { ClientOptions, Job, JobId, Logger } from "./types.js";

/**
 * A handler runs one attempt of a job. Returning completes the job; what
 * it throws decides its fate (PermanentError, RetryAfterError, SnoozeError,
 * else a retry at the policy's delay). signal aborts when the lease is lost
 * (LeaseLostError) or expires (LeaseExpiredError), or at the end of a
 * shutdown's grace period (WorkerShutdownError): return promptly then.
 */
export type Handler<T = unknown> = (job: Job<T>, signal: AbortSignal, ctx: HandlerContext) => Promise<void> | void;

/** The largest progress document backoff.heartbeat takes, in bytes. */
const MAX_PROGRESS_BYTES = 8192;

/**
 * HandlerContext is what a handler may record for its attempt, the
 * third argument of every handler (docs/workflows.md).
 */
export class HandlerContext {
  /** The output set so far, as JSON text; undefined: none. */
  output: string | undefined;
  private progress: string | undefined;

  /**
   * setOutput records value (any JSON value; a RawJSON as it is) as the
   * job's output: when the handler returns, the Worker completes the job
   * with it, and jobOutput and its dependents' parentOutputs read it. A
   * later call replaces an earlier one. An output over the queue's
   * max_output_bytes dead-letters the job, naming the refusal.
   * InvalidArgumentError when value has no JSON form.
   */
  setOutput(value: unknown): void {
    this.output = encodeJSON("set output", value);
  }

  /**
   * reportProgress records value (any JSON value, at most 8 KiB) as the
   * job's progress: the attempt's next heartbeat sends it (every heartbeat
   * interval, a third of the lease by default), and backoff.job_detail and
   * `backoffctl jobs show` display it. A later call replaces a progress not
   * sent yet.
   */
  reportProgress(value: unknown): void {
    const text = encodeJSON("report progress", value);
    const size = Buffer.byteLength(text, "utf8");
    if (size > MAX_PROGRESS_BYTES) {
      throw new InvalidArgumentError(`report progress: ${size} bytes, over ${MAX_PROGRESS_BYTES}`);
    }
    this.progress = text;
  }

  /** takeProgress returns the progress reported since the last heartbeat and forgets it (the heartbeat's). */
  takeProgress(): string | undefined {
    const p = this.progress;
    this.progress = undefined;
    return p;
  }
}

/** One queue a Worker serves. Only queue and handler are required. */
export interface QueueConfig<T = unknown> {
  queue: string;
  handler: Handler<T>;
  /**
   * decode checks the payload before the handler sees it and returns it
   * typed; a payload it throws on can never succeed, so its job is
   * dead-lettered at once (non_retryable).
   */
  decode?: (payload: unknown) => T;
  /** How many handlers of this queue run at once (default 10). */
  concurrency?: number;
  /** The most jobs one claim takes (default concurrency). */
  batchSize?: number;
  /** The lease each claim and heartbeat asks for, in ms (default: the policy's lease). */
  leaseMs?: number;
  /**
   * How often a running attempt's lease is extended, in ms (default: a
   * third of the lease; negative: never, and the lease then aborts the
   * handler). Shorter than leaseMs.
   */
  heartbeatIntervalMs?: number;
}

/** defineQueue types a queue's handler from its decode function (or an explicit T). */
export function defineQueue<T>(cfg: QueueConfig<T>): QueueConfig<T> {
  return cfg;
}

/** A Worker's configuration. */
export interface WorkerConfig extends ClientOptions {
  /** The queues it serves: they share one LISTEN connection, one maintenance loop and one completer. */
  queues: QueueConfig<any>[];
  /** How often an idle queue is looked at without a notification, in ms (default 1000): how late a job can start. */
  pollIntervalMs?: number;
  /** How often expired leases are reaped and the live jobs' segments rotated (backoff.rotate), in ms (default 5000; negative: never, when something else runs backoff.reap and backoff.rotate). */
  reapIntervalMs?: number;
  /**
   * How often due schedules are fired (backoff.fire_schedules, docs/schedules.md), in ms (default 1000, the first
   * time at start; negative: never, when pg_cron or another process fires them). Any number of workers may fire:
   * each slot is enqueued once. It shares the reaper's loop and connection, one call at a time.
   */
  scheduleIntervalMs?: number;
  /** How long a shutdown waits for running handlers before aborting their signals, in ms (default 30000). */
  shutdownTimeoutMs?: number;
  /** Only poll: no LISTEN connection. */
  disableListen?: boolean;
  /**
   * The pool is a pgbackoff router's (docs/sharding.md): read its layout at
   * start and send claims, completions, failures, heartbeats and snoozes
   * straight to the shards, over a pool per shard the worker needs (the
   * pool's options, max included, at the shard's host, port and database),
   * and LISTEN on the queues' shards. Maintenance (reap, rotate, schedules,
   * the idle look) and wake-up registrations go through the router. A
   * layout change (a placement, a queue moved) is followed: the layout's
   * version is read again when a claim finds fewer jobs than asked (at most
   * once a second) and at each maintenance tick. A pool that is not a
   * router's fails run with NotARouterError.
   */
  directShards?: boolean;
}

/**
 * connectionsNeeded is how many connections of its pool a Worker uses at
 * once at most: one claim per queue, the completer, the maintenance loop and the
 * LISTEN connection (which it holds while it runs). Heartbeats and settle
 * calls share them.
 */
export function connectionsNeeded(cfg: WorkerConfig): number {
  const maintains = (cfg.reapIntervalMs ?? 5000) >= 0 || (cfg.scheduleIntervalMs ?? 1000) >= 0;
  return cfg.queues.length + 1 + (maintains ? 1 : 0) + (cfg.disableListen ? 0 : 1);
}

interface Attempt {
  job: Job;
  producer: Producer;
  queue: QueueConfig<any>;
  controller: AbortController;
  ctx: HandlerContext;
}

/**
 * How often an idle Worker reaps, rotates and fires schedules when no look
 * asked for it (docs/adr/0083): under backoff.liveness's minute for the
 * workers it sees.
 */
export const IDLE_MAINTENANCE_MS = 30_000;

/** How many times a settle call is made in all while it fails with a transient error. */
const SETTLE_TRIES = 6;

/**
 * Worker claims jobs of one or more queues and runs them with their
 * handlers. Make it with `new Worker(pool, config)` and run it with run().
 */
export class Worker {
  private readonly queues: QueueConfig<any>[];
  private readonly pollIntervalMs: number;
  private readonly reapIntervalMs: number;
  private readonly scheduleIntervalMs: number;
  private readonly shutdownTimeoutMs: number;
  // Keyed by "id/attempt": a job reaped and claimed again by this worker
  // while its old attempt still runs is two entries.
  private readonly running = new Map<string, { attempt: Attempt; done: Promise<void> }>();
  private started = false;
  // Set by run.
  private client!: Client;
  private log!: Logger;
  private completer!: Completer;
  private notifier!: Notifier;
  private producers: Producer[] = [];
  // Direct mode: the shards' pools and clients.
  private shards: Shards | undefined;
  // The idle queues' look (docs/adr/0083): on while the maintenance loop
  // runs and the schema has backoff.next_work; lookFailed while looks fail;
  // claims counts the claims that found jobs (busy or idle).
  private lookOn = false;
  private lookFailed = false;
  private claims = 0;

  /**
   * The pool serves the calls and lends the worker one connection for
   * LISTEN while it runs; a pool whose max is below connectionsNeeded is
   * refused with InvalidArgumentError.
   */
  constructor(
    private readonly pool: pg.Pool,
    private readonly cfg: WorkerConfig,
  ) {
    const seen = new Set<string>();
    if (cfg.queues.length === 0) throw new InvalidArgumentError("new worker: no queues");
    this.queues = cfg.queues.map((q) => {
      if (!q.queue) throw new InvalidArgumentError("new worker: empty queue");
      if (seen.has(q.queue)) throw new InvalidArgumentError(`new worker: queue ${JSON.stringify(q.queue)} given twice`);
      seen.add(q.queue);
      const name = `new worker for ${JSON.stringify(q.queue)}`;
      if (typeof q.handler !== "function") throw new InvalidArgumentError(`${name}: no handler`);
      if (q.leaseMs !== undefined && !(q.leaseMs > 0)) {
        throw new InvalidArgumentError(`${name}: the lease must be positive, got ${q.leaseMs}ms`);
      }
      if (q.leaseMs !== undefined && (q.heartbeatIntervalMs ?? 0) >= q.leaseMs) {
        throw new InvalidArgumentError(
          `${name}: heartbeat interval ${q.heartbeatIntervalMs}ms must be shorter than the lease ${q.leaseMs}ms`,
        );
      }
      const concurrency = q.concurrency !== undefined && q.concurrency > 0 ? q.concurrency : 10;
      const batch = q.batchSize !== undefined && q.batchSize > 0 ? Math.min(q.batchSize, concurrency) : concurrency;
      return { ...q, concurrency, batchSize: batch };
    });
    this.pollIntervalMs = cfg.pollIntervalMs !== undefined && cfg.pollIntervalMs > 0 ? cfg.pollIntervalMs : 1000;
    this.reapIntervalMs = cfg.reapIntervalMs ?? 5000;
    this.scheduleIntervalMs = cfg.scheduleIntervalMs !== undefined && cfg.scheduleIntervalMs !== 0 ? cfg.scheduleIntervalMs : 1000;
    this.shutdownTimeoutMs = cfg.shutdownTimeoutMs !== undefined && cfg.shutdownTimeoutMs >= 0 ? cfg.shutdownTimeoutMs : 30_000;
    const need = connectionsNeeded(cfg);
    const have = pool.options?.max ?? 10;
    if (have < need) {
      throw new InvalidArgumentError(
        `new worker: the pool allows ${have} connections, this worker needs at least ${need} ` +
          `(${this.queues.length} queues' claims, the completer, the maintenance loop, LISTEN); raise the pool's max`,
      );
    }
  }

  /** The name this worker writes into locked_by (known once run has started). */
  get workerId(): string | undefined {
    return this.client?.workerId;
  }

  /**
   * run checks the schema, then claims and runs jobs until signal aborts.
   * It then stops claiming and waits up to shutdownTimeoutMs for running
   * handlers; it aborts the signals of those still running
   * (WorkerShutdownError), and a handler that throws then has its job
   * failed as retryable, due at once. A handler that ignores its signal
   * keeps its job: heartbeats go on and run does not return until that
   * handler has returned and its outcome is recorded, so the job never runs
   * elsewhere while it still runs here (docs/adr/0028). A Worker runs once.
   */
  async run(signal: AbortSignal): Promise<void> {
    if (this.started) throw new InvalidArgumentError("run worker: a Worker runs once");
    this.started = true;
    this.client = await Client.connect(this.pool, this.cfg);
    const log = (this.log = this.client.logger);
    if (this.cfg.directShards) {
      const shards = new Shards(this.pool, this.queues.map((q) => q.queue), this.pool.options?.max ?? 10, {
        now: this.cfg.now,
        workerId: this.client.workerId,
        logger: log,
      });
      try {
        const layout = await shards.open();
        log.info("direct to the shards", { layoutVersion: layout.version, shards: this.where(shards) });
      } catch (err) {
        await shards.close();
        throw err;
      }
      this.shards = shards;
    }
    this.completer = new Completer(
      (id) => this.forJob(id),
      log,
      (call) => this.repeat(call),
      (queues) => {
        for (const p of this.producers) if (queues.has(p.cfg.queue)) p.settled();
      },
    );
    const listenOn = () => (this.shards === undefined ? [this.pool] : [...this.shards.served().keys()].map((k) => this.shards!.pools.get(k)!));
    this.notifier = new Notifier(listenOn, this.client, log, this.pollIntervalMs, (queue) => {
      for (const p of this.producers) if (queue === "" || p.cfg.queue === queue) p.wake();
    });
    const host = {
      client: this.client,
      log,
      notifier: this.notifier,
      pollIntervalMs: this.pollIntervalMs,
      lookOn: () => this.lookOn,
      claimed: () => {
        this.claims++;
      },
      start: (p: Producer, job: Job) => this.start(p, job),
      forQueue: (queue: string) => (this.shards === undefined ? this.client : this.shards.forQueue(queue)),
      fewer: () => this.follow(false),
    };
    this.producers = this.queues.map((q) => new Producer(host, settingsOf(q)));

    const background = new AbortController();
    const loops: Promise<void>[] = [];
    if (!this.cfg.disableListen) loops.push(this.notifier.listen(background.signal));
    this.lookOn = this.reapIntervalMs > 0 || this.scheduleIntervalMs > 0;
    if (this.lookOn) loops.push(this.maintain(background.signal));
    log.info("worker started", { worker: this.client.workerId, queues: this.queues.map((q) => q.queue) });

    await Promise.all(this.producers.map((p) => p.run(signal)));

    await this.shutdown();
    await this.notifier.unregisterAll();
    background.abort();
    await Promise.all(loops);
    await this.completer.stop();
    await this.shards?.close();
    log.info("worker stopped", { worker: this.client.workerId });
  }

  /** forJob is where a job's settling calls go: its id's shard in direct mode. */
  private forJob(id: JobId): Client {
    return this.shards === undefined ? this.client : this.shards.forJob(id);
  }

  private where(shards: Shards): Record<string, number> {
    return Object.fromEntries(this.queues.map((q) => [q.queue, shards.queueShard(q.queue)]));
  }

  /**
   * follow (direct mode) reads the router's layout version, at most once a
   * second, or five from a maintenance tick, and follows a change: claims
   * go to the queues' new shards, LISTEN moves there, registrations are
   * written again.
   */
  private async follow(tick: boolean): Promise<void> {
    const shards = this.shards;
    if (shards === undefined) return;
    try {
      if (!(await shards.follow(tick))) return;
    } catch (err) {
      this.log.warn("read the router's layout failed; claims stay where they went", { err });
      return;
    }
    this.log.info("the router's layout changed", { layoutVersion: shards.layout?.version, shards: this.where(shards) });
    this.notifier.relisten();
    for (const p of this.producers) p.wake();
  }

  /**
   * shutdown waits for running handlers, aborts those left after the grace
   * period, then waits for every one of them: a job whose handler still
   * runs stays leased to this worker (its heartbeats go on).
   */
  private async shutdown(): Promise<void> {
    if (await this.waitHandlers(this.shutdownTimeoutMs)) return;
    this.log.warn("shutdown timeout: aborting running handlers", { running: this.running.size });
    for (const { attempt } of this.running.values()) attempt.controller.abort(new WorkerShutdownError());
    while (!(await this.waitHandlers(10_000))) {
      this.log.error("handlers ignore their aborted signal; their jobs stay leased to this worker until they return", {
        jobs: [...this.running.keys()],
      });
    }
  }

  /** waitHandlers waits up to ms for every running handler; true when none is left. */
  private async waitHandlers(ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (this.running.size > 0) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      const timeout = new AbortController();
      await Promise.race([
        Promise.all([...this.running.values()].map((r) => r.done)),
        sleep(left, timeout.signal),
      ]);
      timeout.abort();
    }
    return true;
  }

  /**
   * maintain fires due schedules at start, then makes the idle queues' look
   * every pollIntervalMs (or scheduleIntervalMs or reapIntervalMs, the
   * shortest; docs/adr/0083): it wakes the parked producers whose queue has a job due
   * and fires, reaps and rotates only when each has work. Reap and rotate
   * keep their reapIntervalMs while jobs flow (rotate keeps the live
   * segments small under load); idle, they and fireSchedules run once every
   * IDLE_MAINTENANCE_MS, which keeps backoff.liveness seeing the worker.
   * One call at a time on one connection, as the Go Worker does; every call
   * is safe from many workers at once, so no leader is needed. Without the
   * look (a schema before next_work, a look that failed) each runs at its
   * own interval.
   */
  private async maintain(signal: AbortSignal): Promise<void> {
    const start = Date.now();
    // PollInterval bounds how late a job starts, scheduleIntervalMs how late
    // a slot fires, reapIntervalMs how late an expired lease is reaped.
    const lookEvery = Math.min(
      this.pollIntervalMs,
      this.scheduleIntervalMs > 0 ? this.scheduleIntervalMs : Infinity,
      this.reapIntervalMs > 0 ? this.reapIntervalMs : Infinity,
    );
    let nextReap = this.reapIntervalMs > 0 ? start + this.reapIntervalMs : Infinity;
    let nextFire = this.scheduleIntervalMs > 0 ? start : Infinity;
    let nextLook = start + lookEvery;
    let fireAtStart = this.scheduleIntervalMs > 0;
    let lastFull = start;
    let claims = this.claims;
    while (!signal.aborted) {
      await sleep(Math.min(nextReap, nextFire, this.lookOn ? nextLook : Infinity) - Date.now(), signal);
      if (signal.aborted) return;
      await this.follow(true);
      const now = Date.now();
      const covered = this.lookOn && !this.lookFailed; // the look decides
      if (now >= nextFire) {
        if (fireAtStart || !covered) await this.fireSchedules(signal);
        fireAtStart = false;
        nextFire = Math.max(nextFire + this.scheduleIntervalMs, Date.now());
      }
      if (now >= nextReap) {
        const busy = this.claims !== claims || this.producers.some((p) => p.inflight > 0);
        claims = this.claims;
        if (busy || !covered) {
          await this.reap(signal);
          lastFull = Date.now();
        }
        nextReap = Math.max(nextReap + this.reapIntervalMs, Date.now());
      }
      if (this.lookOn && now >= nextLook) {
        await this.lookAndDo(signal);
        nextLook = Math.max(nextLook + lookEvery, Date.now());
        if (this.lookOn && now - lastFull >= IDLE_MAINTENANCE_MS) {
          // Idle or not: backoff.liveness sees the maintenance run, and
          // rotate names this worker to it.
          if (this.reapIntervalMs > 0) await this.reap(signal);
          if (this.scheduleIntervalMs > 0) await this.fireSchedules(signal);
          lastFull = Date.now();
        }
      }
    }
  }

  /**
   * lookAndDo makes one look (backoff.next_work) for the parked queues and
   * does what it found due; after a failed look every producer claims, and
   * the loop fires, reaps and rotates at their own intervals until a look
   * works.
   */
  private async lookAndDo(signal: AbortSignal): Promise<void> {
    const parked = this.producers.filter((p) => p.parked).map((p) => p.cfg.queue);
    let rows;
    try {
      rows = await this.client.nextWork(parked, this.notifier.listening, this.notifier.ttlMs);
    } catch (err) {
      if (signal.aborted) return;
      if (sqlState(err) === "42883") {
        this.log.info("the schema has no backoff.next_work: idle queues poll on their own (migrate to version 5)");
        this.lookOn = false;
      } else {
        (this.lookFailed ? this.log.debug : this.log.error).call(
          this.log,
          "look for work failed; idle queues claim and schedules fire at every look until it works",
          { err },
        );
        this.lookFailed = true;
      }
      for (const p of this.producers) p.wake();
      return;
    }
    this.lookFailed = false;
    const due = new Set(rows.filter((r) => r.due && r.kind === "queue").map((r) => r.queue));
    for (const p of this.producers) if (due.has(p.cfg.queue)) p.wake();
    const has = (kind: string) => rows.some((r) => r.due && r.kind === kind);
    if (has("schedules") && this.scheduleIntervalMs > 0) await this.fireSchedules(signal);
    if (this.reapIntervalMs > 0) {
      if (has("reap")) await this.reapLeases(signal);
      if (has("rotate")) await this.rotate(signal);
    }
  }

  /**
   * fireSchedules enqueues the jobs of the schedules due now. Nothing due
   * costs one index probe, as cheap as a probe of the next fire time
   * (docs/adr/0068). A failure is a warning: a slot stays due until a call
   * fires it.
   */
  private async fireSchedules(signal: AbortSignal): Promise<void> {
    try {
      const fired = await this.client.fireSchedules();
      for (const f of fired) this.log.debug("fired schedule", { schedule: f.schedule, slot: f.slot, job: f.jobId });
      // A slot is due at once; without LISTEN nothing else tells the
      // producers before their next poll.
      if (fired.length > 0) for (const p of this.producers) p.wake();
    } catch (err) {
      if (!signal.aborted) this.log.warn("fire schedules failed", { err });
    }
  }

  /** reap sends expired leases through the retry decision, then rotates the live jobs' segments. */
  private async reap(signal: AbortSignal): Promise<void> {
    await this.reapLeases(signal);
    // The live jobs' segments, beside reap (docs/adr/0061).
    await this.rotate(signal);
  }

  /** reapLeases sends expired leases through the retry decision and wakes the producers when it moved any. */
  private async reapLeases(signal: AbortSignal): Promise<void> {
    try {
      const n = await this.client.reap();
      if (n > 0) {
        this.log.info("reaped expired leases", { jobs: n });
        for (const p of this.producers) p.wake();
      }
    } catch (err) {
      if (!signal.aborted) this.log.error("reap failed", { err });
    }
  }

  private async rotate(signal: AbortSignal): Promise<void> {
    try {
      // Named: the worker counts as seen (backoff.liveness), busy or idle.
      await this.client.rotate(this.client.workerId);
    } catch (err) {
      if (!signal.aborted) this.log.error("rotate failed", { err });
    }
  }

  /** start runs one claimed job. */
  private start(p: Producer, job: Job): void {
    const queue = this.queues.find((q) => q.queue === p.cfg.queue)!;
    const attempt: Attempt = { job, producer: p, queue, controller: new AbortController(), ctx: new HandlerContext() };
    const key = `${job.id}/${job.attempt}`;
    p.inflight++;
    const done = this.runAttempt(attempt)
      .catch((err) => this.log.error("running a job failed", { job: job.id, err }))
      .finally(() => {
        this.running.delete(key);
        p.freed();
      });
    this.running.set(key, { attempt, done });
  }

  /** runAttempt runs the handler under the attempt's lease and records its outcome. */
  private async runAttempt(a: Attempt): Promise<void> {
    const { job, queue, controller } = a;
    const signal = controller.signal;
    let leaseMs = job.leaseUntil === null ? 0 : job.leaseUntil.getTime() - this.client.clock().getTime();
    if (leaseMs <= 0) leaseMs = queue.leaseMs ?? 30_000;

    let stopHeartbeat: () => Promise<void>;
    const every = queue.heartbeatIntervalMs ?? 0;
    if (every < 0) {
      // No heartbeats: the lease ends the handler.
      const t = setTimeout(() => controller.abort(new LeaseExpiredError()), leaseMs);
      stopHeartbeat = async () => clearTimeout(t);
    } else {
      // The policy's lease is known only now: an interval not shorter than
      // it would let the lease lapse between beats.
      stopHeartbeat = this.heartbeat(a, leaseMs, every === 0 || every >= leaseMs ? leaseMs / 3 : every);
    }

    let thrown: unknown;
    let threw = false;
    try {
      let payload = job.payload;
      if (queue.decode !== undefined) {
        try {
          payload = queue.decode(job.payload);
        } catch (err) {
          throw new PermanentError(new Error(`decode payload of job ${job.id}: ${errorText(err)}`, { cause: err }));
        }
      }
      await queue.handler({ ...job, payload }, signal, a.ctx);
    } catch (err) {
      thrown = err;
      threw = true;
    }
    await stopHeartbeat();

    if (signal.reason instanceof LeaseLostError) {
      this.log.warn("handler finished after its lease was lost; result dropped", {
        job: job.id,
        attempt: job.attempt,
        err: threw ? thrown : undefined,
      });
      return;
    }
    let outcome = readOutcome(thrown, threw, a.ctx.output);
    if (outcome.kind === "failed" && signal.reason instanceof WorkerShutdownError) {
      // Aborted by the shutdown: not the job's fault, so it is retried at
      // once elsewhere (the attempt, counted at claim, stays spent).
      outcome = { kind: "failed", text: `worker shutdown: ${outcome.text}`, retryInMs: 0 };
    }
    await this.settle(job, outcome);
  }

  /**
   * heartbeat extends the lease every `every` ms until stopped, that is
   * until the handler has returned: a handler aborted by a shutdown but
   * still running keeps its lease. A refused heartbeat aborts the handler
   * with LeaseLostError; a lease that runs out without a successful
   * heartbeat aborts it with LeaseExpiredError.
   */
  private heartbeat(a: Attempt, leaseMs: number, every: number): () => Promise<void> {
    const { job, controller, queue, ctx } = a;
    let watchdog = setTimeout(() => controller.abort(new LeaseExpiredError()), leaseMs);
    let stopped = false;
    let beat: Promise<void> | undefined;
    let timer: NodeJS.Timeout;
    const tick = async () => {
      try {
        const progress = ctx.takeProgress();
        const until =
          progress === undefined
            ? await this.forJob(job.id).heartbeat(job.id, job.attempt, queue.leaseMs)
            : await this.forJob(job.id).heartbeatProgress(job.id, job.attempt, new RawJSON(progress), queue.leaseMs);
        const left = until.getTime() - this.client.clock().getTime();
        if (left > 0 && !stopped) {
          clearTimeout(watchdog);
          watchdog = setTimeout(() => controller.abort(new LeaseExpiredError()), left);
        }
      } catch (err) {
        if (err instanceof StaleAttemptError || err instanceof InvalidTransitionError || err instanceof JobNotFoundError) {
          this.log.warn("lease lost; aborting the handler", { job: job.id, attempt: job.attempt, err });
          controller.abort(new LeaseLostError(`pgbackoff: lease lost: ${err.message}`));
          return;
        }
        this.log.error("heartbeat failed; will retry", { job: job.id, err });
      }
      if (!stopped) timer = setTimeout(() => (beat = tick()), every);
    };
    timer = setTimeout(() => (beat = tick()), every);
    return async () => {
      stopped = true;
      clearTimeout(timer);
      await beat;
      clearTimeout(watchdog);
    };
  }

  /** settle records an outcome: completions go to the batched completer, the rest are one fenced call each. */
  private async settle(job: Job, o: Outcome): Promise<void> {
    // A small output rides the batch; a larger one, which its queue's
    // limit may refuse, is a call of its own (BATCHED_OUTPUT_BYTES).
    const output = o.kind === "completed" ? o.output : undefined;
    const batched = output === undefined || Buffer.byteLength(output, "utf8") <= BATCHED_OUTPUT_BYTES;
    if (o.kind === "completed" && batched && this.completer.add(job.id, job.attempt, job.queue, output)) return;
    try {
      const client = this.forJob(job.id);
      switch (o.kind) {
        case "completed": {
          let calls = 0;
          try {
            await this.repeat(() => {
              calls++;
              return output === undefined
                ? client.complete(job.id, job.attempt)
                : client.completeWithOutput(job.id, job.attempt, new RawJSON(output));
            });
          } catch (err) {
            if (output !== undefined && err instanceof InvalidArgumentError) {
              // The output was refused (over the queue's max_output_bytes):
              // the job stays running, and another attempt would produce
              // the same output, so it is dead-lettered with the refusal
              // instead of waiting for the reaper.
              const text = `output refused: ${err.message}`;
              const j = await this.repeat(() => client.fail(job.id, job.attempt, text, { retryable: false }));
              this.log.info("job failed", { job: job.id, attempt: job.attempt, status: j.status, runAt: j.runAt, err: text });
              break;
            }
            // A repeat refused because the first call, whose reply was
            // lost, completed the job: that is this attempt's completion.
            const refused = err instanceof StaleAttemptError || err instanceof InvalidTransitionError;
            if (!refused || calls === 1 || (await confirmCompletions(client, this.log, [job])).length !== 1) throw err;
          }
          break;
        }
        case "snoozed":
          await this.repeat(() => client.snooze(job.id, job.attempt, o.delayMs));
          break;
        case "permanent":
        case "failed": {
          const j = await this.repeat(() =>
            client.fail(job.id, job.attempt, o.text, {
              retryable: o.kind === "failed",
              retryInMs: o.kind === "failed" ? o.retryInMs : undefined,
            }),
          );
          this.log.info("job failed", { job: job.id, attempt: job.attempt, status: j.status, runAt: j.runAt, err: o.text });
          break;
        }
      }
    } catch (err) {
      if (err instanceof StaleAttemptError || err instanceof InvalidTransitionError) {
        this.log.warn("job no longer ours; outcome dropped", { job: job.id, attempt: job.attempt, outcome: o.kind, err });
      } else {
        // The lease will expire and the reaper will retry the job.
        this.log.error("could not record the outcome; the reaper will retry the job", { job: job.id, outcome: o.kind, err });
      }
    }
  }

  /**
   * repeat runs a settle call again, SETTLE_TRIES times in all with waits
   * of 100 ms doubling, while it fails with an error that says nothing
   * about the job (a dropped connection, a restart). The calls are fenced
   * by the attempt, whose tokens never repeat, so a repeat after a lost
   * reply takes effect once or is refused; without it a blip would leave
   * the job running until the reaper counts a finished attempt as a crash.
   */
  private async repeat<R>(call: () => Promise<R>): Promise<R> {
    let waitMs = 100;
    for (let attempt = 1; ; attempt++) {
      try {
        return await call();
      } catch (err) {
        if (attempt >= SETTLE_TRIES || !transient(err)) throw err;
        this.log.warn("settle call failed; retrying", { err, retryInMs: waitMs });
        await sleep(waitMs);
        waitMs *= 2;
      }
    }
  }
}

function settingsOf(q: QueueConfig<any>): QueueSettings {
  return { queue: q.queue, concurrency: q.concurrency ?? 10, batchSize: q.batchSize ?? 10, leaseMs: q.leaseMs };
}
