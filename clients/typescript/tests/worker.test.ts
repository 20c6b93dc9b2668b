// The Worker against a real PostgreSQL. Leases here are real time (the
// Worker's timers are), kept short; no test waits for a backoff: a failed
// job's next run is read from its row, not awaited.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import pg from "pg";

import {
  InvalidArgumentError,
  LeaseLostError,
  PermanentError,
  RetryAfterError,
  SnoozeError,
  Worker,
  WorkerShutdownError,
  defineQueue,
} from "../src/index.js";
import type { Job, WorkerConfig } from "../src/index.js";
import { MemoryLogger, TestClock, connect, deferred, newPool, queueName, readJob, until } from "./helpers.js";

let pool: pg.Pool;
before(() => {
  pool = newPool(12);
});
after(async () => {
  await pool.end();
});

/** start runs a worker until the returned stop is called; stop resolves when run has returned. */
function start(cfg: WorkerConfig, on: pg.Pool = pool): { worker: Worker; stop: () => Promise<void>; done: Promise<void> } {
  const worker = new Worker(on, { logger: new MemoryLogger(), workerId: queueName("w"), ...cfg });
  const ac = new AbortController();
  const done = worker.run(ac.signal);
  return {
    worker,
    done,
    stop: async () => {
      ac.abort();
      await done;
    },
  };
}

async function statuses(queue: string): Promise<Record<string, number>> {
  const r = await pool.query("SELECT status, count(*)::int AS n FROM backoff.jobs WHERE queue = $1 GROUP BY status ORDER BY status", [queue]);
  return Object.fromEntries(r.rows.map((x) => [x.status, x.n]));
}

// A worker test that waits for a handler fails after this instead of hanging.
// A guard against a hang, generous for a busy machine; no test waits it out.
const opts = { timeout: 120_000 };

describe("Worker", () => {
  test("refuses a configuration it cannot run", opts, () => {
    const h = async () => {};
    assert.throws(() => new Worker(pool, { queues: [] }), InvalidArgumentError);
    assert.throws(() => new Worker(pool, { queues: [{ queue: "a", handler: h }, { queue: "a", handler: h }] }), /given twice/);
    assert.throws(() => new Worker(pool, { queues: [{ queue: "a", handler: h, leaseMs: 100, heartbeatIntervalMs: 100 }] }), /shorter than the lease/);
    const small = new pg.Pool({ max: 3 });
    assert.throws(() => new Worker(small, { queues: [{ queue: "a", handler: h }] }), /needs at least 4/);
    void small.end();
  });

  test("runs several queues, each within its concurrency, and batches completions", opts, async () => {
    const qa = queueName("multi-a");
    const qb = queueName("multi-b");
    const sent: string[] = [];
    const recorded = newPool(12, { readCommitted: true });
    const query = recorded.query.bind(recorded) as (text: string, values?: unknown[]) => Promise<pg.QueryResult>;
    (recorded as any).query = (text: string, values?: unknown[]) => {
      sent.push(text);
      return query(text, values);
    };
    const c = await connect(pool);
    await c.enqueueMany([...Array(8)].map((_, i) => ({ queue: qa, payload: { n: i } })));
    await c.enqueueMany([...Array(9)].map((_, i) => ({ queue: qb, payload: { n: i } })));

    const running = { [qa]: 0, [qb]: 0 };
    const most = { [qa]: 0, [qb]: 0 };
    const seen: Job<{ n: number }>[] = [];
    const handler = async (job: Job<{ n: number }>) => {
      running[job.queue]!++;
      most[job.queue] = Math.max(most[job.queue]!, running[job.queue]!);
      seen.push(job);
      await new Promise((r) => setTimeout(r, 40));
      running[job.queue]!--;
    };
    const w = start(
      {
        queues: [
          { queue: qa, handler, concurrency: 2 },
          { queue: qb, handler, concurrency: 3 },
        ],
        pollIntervalMs: 50,
      },
      recorded,
    );
    try {
      await until(async () => (await statuses(qa)).completed === 8 && (await statuses(qb)).completed === 9, 15_000, "all jobs completed");
    } finally {
      await w.stop();
      await recorded.end();
    }
    assert.equal(most[qa], 2);
    assert.equal(most[qb], 3);
    assert.equal(seen.length, 17);
    assert.ok(seen.every((j) => j.attempt === 1 && j.countedAttempt === 1 && typeof j.payload.n === "number"));
    assert.ok(sent.some((s) => s.includes("backoff.complete_many(")), "completions go through complete_many");
    assert.ok(!sent.some((s) => s.includes("backoff.complete(")), "never one by one while the completer runs");
    for (const text of sent) {
      assert.match(text, /backoff\.[a-z_]+\(/, text);
      assert.doesNotMatch(text, /backoff\.jobs|\b(UPDATE|INSERT|DELETE)\b/i, text);
    }
  });

  test("what a handler throws steers the retry", opts, async () => {
    const q = queueName("steer");
    const c = await connect(pool);
    const ids = await c.enqueueMany([
      { queue: q, payload: { kind: "permanent" } },
      { queue: q, payload: { kind: "retry-after" } },
      { queue: q, payload: { kind: "snooze" } },
      { queue: q, payload: { kind: "plain" }, policy: "moderate" },
      { queue: q, payload: { kind: 42 } },
      { queue: q, payload: { kind: "ok" } },
    ]);
    type Kind = { kind: string };
    const w = start({
      queues: [
        defineQueue({
          queue: q,
          decode: (p: unknown): Kind => {
            if (typeof (p as Kind).kind !== "string") throw new TypeError("kind must be a string");
            return p as Kind;
          },
          handler: async (job) => {
            switch (job.payload.kind) {
              case "permanent":
                throw new PermanentError("bad address");
              case "retry-after":
                throw new RetryAfterError(45_000, new Error("429 Too Many Requests"));
              case "snooze":
                throw new SnoozeError(60_000);
              case "plain":
                throw new TypeError("boom");
            }
          },
        }),
      ],
      pollIntervalMs: 3_600_000,
      reapIntervalMs: -1,
    });
    try {
      const settled = { completed: 1, dead_lettered: 2, pending: 1, retrying: 2 };
      await until(async () => JSON.stringify(await statuses(q)) === JSON.stringify(settled), 10_000, "every job settled");
    } finally {
      await w.stop();
    }
    const [perm, later, snoozed, plain, undecodable, ok] = await Promise.all(ids.map((id) => readJob(pool, id)));
    assert.equal(perm!.status, "dead_lettered");
    assert.equal(perm!.deadLetterReason, "non_retryable");
    assert.equal(perm!.lastError, "permanent: bad address");

    assert.equal(later!.status, "retrying");
    assert.equal(later!.runAt.getTime() - later!.lastFailedAt!.getTime(), 45_000);
    assert.equal(later!.lastError, "retry after 45000ms: 429 Too Many Requests");

    assert.equal(snoozed!.status, "pending");
    assert.equal(snoozed!.attempt, 1);
    assert.equal(snoozed!.countedAttempt, 0);
    assert.equal(snoozed!.errors.length, 0);
    assert.ok(snoozed!.runAt.getTime() - Date.now() > 50_000);

    assert.equal(plain!.status, "retrying");
    assert.equal(plain!.lastError, "TypeError: boom");
    const policyDelay = await pool.query(
      "SELECT (extract(epoch FROM backoff.retry_delay('moderate', 1, $1::bigint)) * 1000)::float8 AS ms",
      [plain!.id],
    );
    // Dates hold milliseconds, the database microseconds: 1 ms either way.
    const delay = plain!.runAt.getTime() - plain!.lastFailedAt!.getTime();
    assert.ok(Math.abs(delay - policyDelay.rows[0].ms) <= 1, `the policy's delay: ${delay} ms, policy ${policyDelay.rows[0].ms} ms`);

    assert.equal(undecodable!.status, "dead_lettered");
    assert.equal(undecodable!.deadLetterReason, "non_retryable");
    assert.match(undecodable!.lastError!, /^permanent: decode payload of job \d+: TypeError: kind must be a string$/);

    assert.equal(ok!.status, "completed");
  });

  test("heartbeats keep a job leased past its lease while another worker reaps", opts, async () => {
    // A lease of a minute, longer than any stall of a busy machine: the
    // handler runs until the heartbeats have carried its lease two seconds
    // past the one its claim gave; a reaper whose clock is one second past
    // that first lease (where it would have run out without heartbeats)
    // then leaves it alone (it may reap what earlier tests left running in
    // this database).
    const q = queueName("beat");
    const c = await connect(pool);
    const id = await c.enqueue(q);
    const finished = deferred();
    const w = start({
      queues: [
        {
          queue: q,
          leaseMs: 60_000,
          heartbeatIntervalMs: 100,
          handler: async (job) => {
            const claimed = job.leaseUntil!.getTime();
            await until(async () => (await readJob(pool, id)).leaseUntil!.getTime() > claimed + 2_000, 60_000, "the lease extended");
            await pool.query("SELECT backoff.reap($1)", [new Date(claimed + 1_000)]);
            finished.resolve();
          },
        },
      ],
      pollIntervalMs: 50,
      reapIntervalMs: -1,
    });
    const reaper = await connect(pool);
    let reaping = true;
    const reaps = (async () => {
      while (reaping) {
        await reaper.reap();
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    try {
      await finished.promise;
      await until(async () => (await readJob(pool, id)).status === "completed", 60_000, "completion");
    } finally {
      reaping = false;
      await reaps;
      await w.stop();
    }
    const job = await readJob(pool, id);
    assert.equal(job.attempt, 1, "never claimed again");
    assert.equal(job.leaseExpiries, 0);
  });

  test("a refused heartbeat aborts the handler with LeaseLostError and drops its result", opts, async () => {
    const q = queueName("lost");
    const c = await connect(pool);
    const id = await c.enqueue(q);
    const started = deferred();
    const reason = deferred<unknown>();
    const w = start({
      queues: [
        {
          queue: q,
          leaseMs: 5_000,
          heartbeatIntervalMs: 100,
          handler: async (_job, signal) => {
            started.resolve();
            await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
            reason.resolve(signal.reason);
          },
        },
      ],
      pollIntervalMs: 50,
    });
    try {
      await started.promise;
      await c.cancel(id, "operator cancelled");
      assert.ok((await reason.promise) instanceof LeaseLostError);
    } finally {
      await w.stop();
    }
    const job = await readJob(pool, id);
    assert.equal(job.status, "cancelled", "the handler's return did not complete it");
  });

  test("shutdown hands back a running job: failed as retryable, due at once", opts, async () => {
    const q = queueName("shutdown");
    const c = await connect(pool);
    const id = await c.enqueue(q);
    const started = deferred();
    const w = start({
      queues: [
        {
          queue: q,
          handler: async (_job, signal) => {
            started.resolve();
            await new Promise((r) => signal.addEventListener("abort", r, { once: true }));
            throw signal.reason;
          },
        },
      ],
      shutdownTimeoutMs: 100,
      pollIntervalMs: 50,
    });
    await started.promise;
    await w.stop();
    const job = await readJob(pool, id);
    assert.equal(job.status, "retrying");
    assert.equal(job.attempt, 1);
    assert.equal(job.lastError, `worker shutdown: ${new WorkerShutdownError().message}`);
    assert.ok(job.runAt.getTime() <= job.lastFailedAt!.getTime(), "due at once");
    const [again] = await c.claim(q);
    assert.equal(again?.id, id, "another worker takes it now");
    assert.equal(again?.attempt, 2);
  });

  test("shutdown keeps a job whose handler ignores its signal until the handler returns", opts, async () => {
    const q = queueName("keeps");
    const c = await connect(pool);
    const id = await c.enqueue(q);
    const started = deferred();
    let handlerDone = false;
    // A lease of a minute, longer than any stall of a busy machine: that
    // the heartbeats go on during the shutdown is seen in lease_until.
    const leaseMs = 60_000;
    const w = start({
      queues: [
        {
          queue: q,
          leaseMs,
          heartbeatIntervalMs: 100,
          handler: async () => {
            started.resolve();
            await new Promise((r) => setTimeout(r, 5_000)); // fifty shutdown timeouts, deaf to the signal
            handlerDone = true;
          },
        },
      ],
      shutdownTimeoutMs: 100,
      pollIntervalMs: 50,
      reapIntervalMs: -1,
    });
    await started.promise;
    const stoppedAt = Date.now();
    const stopped = w.stop();
    const reaper = await connect(pool);
    let runReturned = false;
    let lease = 0;
    void stopped.then(() => (runReturned = true));
    while (!runReturned) {
      await reaper.reap();
      const job = await readJob(pool, id);
      if (!handlerDone) {
        assert.equal(job.status, "running", "still leased to the worker shutting down");
        lease = Math.max(lease, job.leaseUntil!.getTime());
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(handlerDone, "run returned only after the handler");
    assert.ok(lease > stoppedAt + leaseMs + 2_000, "a heartbeat two seconds into the shutdown extended the lease");
    const job = await readJob(pool, id);
    assert.equal(job.status, "completed");
    assert.equal(job.attempt, 1);
  });

  test("a rate-limited queue is claimed when queue_state says, not at the next poll", opts, async () => {
    const q = queueName("rate");
    await pool.query("INSERT INTO backoff.queues (name, policy, rate, burst) VALUES ($1, 'default', 20, 1)", [q]);
    const c = await connect(pool);
    await c.enqueueMany([...Array(8)].map(() => ({ queue: q })));
    const t0 = Date.now();
    const w = start({
      queues: [{ queue: q, handler: async () => {} }],
      pollIntervalMs: 3_600_000,
      reapIntervalMs: -1,
    });
    try {
      await until(async () => (await statuses(q)).completed === 8, 10_000, "the queue to drain at its rate");
    } finally {
      await w.stop();
    }
    // 8 jobs at 20 per second with a bucket of 1: about 350 ms, an hour if
    // the worker waited for its poll.
    assert.ok(Date.now() - t0 >= 300, "no faster than the rate");
  });

  test("an idle queue is woken through LISTEN, not by polling", opts, async () => {
    const q = queueName("listen");
    const c = await connect(pool);
    const ran = deferred<string>();
    const w = start({
      queues: [{ queue: q, handler: async (job) => ran.resolve(job.id) }],
      pollIntervalMs: 3_600_000,
      reapIntervalMs: -1,
    });
    const registered = async () =>
      (await pool.query("SELECT count(*)::int AS n FROM backoff.waiting_workers WHERE queue = $1", [q])).rows[0].n === 1;
    try {
      await until(registered, 10_000, "the worker to register as waiting");
      const id = await c.enqueue(q, { hello: "wörld" });
      const t0 = Date.now();
      assert.equal(await ran.promise, id);
      assert.ok(Date.now() - t0 < 5_000);
    } finally {
      await w.stop();
    }
    assert.equal(await registered(), false, "the registration ends at shutdown");
  });

  test("a completion whose reply was lost is confirmed through backoff.job, not logged as refused", opts, async () => {
    const q = queueName("lost-reply");
    const lossy = newPool(12, { readCommitted: true });
    const query = lossy.query.bind(lossy) as (text: string, values?: unknown[]) => Promise<pg.QueryResult>;
    let lost = 0;
    (lossy as any).query = async (text: string, values?: unknown[]) => {
      const r = await query(text, values);
      if (text.includes("backoff.complete_many(") && lost === 0) {
        // The statement committed; its reply never arrives.
        lost++;
        throw Object.assign(new Error("Connection terminated unexpectedly"), { code: "08006" });
      }
      return r;
    };
    const c = await connect(pool);
    const [id] = await c.enqueueMany([{ queue: q }]);
    const logger = new MemoryLogger();
    const w = start({ queues: [{ queue: q, handler: async () => {} }], pollIntervalMs: 50, logger }, lossy);
    try {
      await until(() => logger.lines.some((l) => l.message.startsWith("completions confirmed")), 10_000, "the confirmation");
    } finally {
      await w.stop();
      await lossy.end();
    }
    assert.equal(lost, 1);
    assert.equal((await readJob(pool, id!)).status, "completed");
    assert.ok(!logger.lines.some((l) => l.message.startsWith("completion refused")), JSON.stringify(logger.lines));
  });

  /** putDueSchedule writes a schedule every hour from 90 minutes before the clock's now (its anchor): the slot 30 minutes ago is due, its interval not ended, and 'latest' fires it alone. */
  async function putDueSchedule(name: string, queue: string, clock: TestClock): Promise<void> {
    await pool.query(
      `SELECT backoff.put_schedule($1, $2, p_every => '1 hour', p_anchor => $3, p_payload => '{"from": "schedule"}', p_now => $3)`,
      [name, queue, new Date(clock.now().getTime() - 90 * 60_000)],
    );
  }

  async function scheduledJobs(name: string): Promise<{ id: string; slot: Date | null; status: string }[]> {
    const r = await pool.query(
      "SELECT id::text, schedule_slot AS slot, status::text FROM backoff.jobs WHERE schedule = $1 ORDER BY id",
      [name],
    );
    return r.rows;
  }

  test("fires a due schedule at start and runs the slot's job", opts, async () => {
    const q = queueName("ticks");
    const name = queueName("tick");
    const clock = new TestClock();
    await putDueSchedule(name, q, clock);
    const ran: Job[] = [];
    const w = start({
      queues: [{ queue: q, handler: async (job) => void ran.push(job) }],
      pollIntervalMs: 50,
      reapIntervalMs: -1,
      scheduleIntervalMs: 3_600_000, // only the fire at start
      disableListen: true,
      now: clock.now,
    });
    try {
      await until(async () => (await scheduledJobs(name)).map((j) => j.status).join() === "completed", 10_000, "the slot's job completed");
    } finally {
      await w.stop();
      await pool.query("SELECT backoff.drop_schedule($1)", [name]);
    }
    const [job] = await scheduledJobs(name);
    const slot = job!.slot!.getTime();
    assert.ok(slot <= clock.now().getTime() && slot > clock.now().getTime() - 3_600_000, `slot ${job!.slot} is the latest due`);
    assert.deepEqual(ran.map((j) => j.payload), [{ from: "schedule" }]);
  });

  test("with scheduleIntervalMs negative fires nothing, and still reaps", opts, async () => {
    const q = queueName("ticks");
    const name = queueName("tick");
    const clock = new TestClock();
    await putDueSchedule(name, q, clock);
    // A lease left by a crashed worker: the reap after the first interval
    // shows the maintenance loop ran, and a fire would have come first.
    const other = await connect(pool, { now: clock.now });
    const stranded = (await other.enqueueMany([{ queue: q, payload: {} }]))[0]!;
    await other.claim(q, 1, 1000);
    clock.advance(60_000);
    const w = start({
      queues: [{ queue: q, handler: async () => {} }],
      pollIntervalMs: 3_600_000,
      reapIntervalMs: 20,
      scheduleIntervalMs: -1,
      disableListen: true,
      now: clock.now,
    });
    try {
      await until(async () => (await readJob(pool, stranded)).status !== "running", 10_000, "the stranded lease reaped");
    } finally {
      await w.stop();
    }
    assert.deepEqual(await scheduledJobs(name), []);
    const fired = await other.fireSchedules();
    await pool.query("SELECT backoff.drop_schedule($1)", [name]);
    assert.deepEqual(fired.filter((f) => f.schedule === name).length, 1, "the slot was due all along");
  });

  test("an idle worker looks once for all its queues: no claim, no queue_state, a job due later started by the look", opts, async () => {
    // docs/adr/0083: drained queues park and one backoff.next_work a poll
    // interval stands for their claims and state reads.
    const counted = newPool(12);
    const calls = new Map<string, number>();
    countStatements(counted, (text) => {
      const m = /backoff\.([a-z_]+)\(/.exec(text);
      if (m) calls.set(m[1]!, (calls.get(m[1]!) ?? 0) + 1);
    });
    const n = (fn: string) => calls.get(fn) ?? 0;
    const looks = (k: number) => until(() => n("next_work") >= k, 10_000, `${k} looks`);
    const clock = new TestClock();
    const queues = [...Array(5)].map(() => queueName("idle"));
    const w = start({ queues: queues.map((queue) => ({ queue, handler: async () => {}, concurrency: 1 })), pollIntervalMs: 50, now: clock.now }, counted);
    const inside = w.worker as unknown as { producers: { parked: boolean }[]; notifier?: { listening: boolean } };
    try {
      await until(() => inside.notifier?.listening === true && inside.producers.length === 5 && inside.producers.every((p) => p.parked), 10_000, "every producer parked");
      await looks(n("next_work") + 2);
      const fns = ["claim", "queue_state", "next_work", "reap", "rotate", "fire_schedules", "wait_for_jobs"];
      const before = new Map(fns.map((f) => [f, n(f)]));
      await looks(before.get("next_work")! + 20);
      const during = Object.fromEntries(fns.map((f) => [f, n(f) - before.get(f)!]));
      assert.equal(during.claim, 0, JSON.stringify(during));
      assert.equal(during.queue_state, 0, JSON.stringify(during));
      const total = Object.values(during).reduce((a, b) => a + b, 0);
      assert.ok(total <= 2 * during.next_work!, JSON.stringify(during));

      const c = await connect(pool, { now: clock.now });
      const id = await c.enqueue(queues[3]!, {}, { runAt: new Date(clock.now().getTime() + 30_000) });
      await looks(n("next_work") + 3);
      assert.equal((await readJob(pool, id)).status, "pending", "not due yet");
      clock.advance(30_000);
      await until(async () => (await readJob(pool, id)).status === "completed", 10_000, "the job ran once due");
    } finally {
      await w.stop();
      await counted.end();
    }
  });

  test("an idle worker runs a retry once its backoff ends, found by the look", opts, async () => {
    // docs/adr/0083: no statement announces a retry whose backoff ends; the
    // parked queue's look finds it once the clock reaches it, not before.
    const counted = newPool(12);
    let looks = 0;
    countStatements(counted, (text) => {
      if (text.includes("backoff.next_work(")) looks++;
    });
    const clock = new TestClock();
    const q = queueName("idle-retry");
    let attempts = 0;
    const w = start(
      {
        queues: [
          {
            queue: q,
            concurrency: 1,
            handler: async () => {
              attempts++;
              if (attempts === 1) throw new RetryAfterError(10_000, new Error("downstream 503"));
            },
          },
        ],
        pollIntervalMs: 50,
        now: clock.now,
      },
      counted,
    );
    const inside = w.worker as unknown as { producers: { parked: boolean }[]; notifier?: { listening: boolean } };
    try {
      await until(() => inside.notifier?.listening === true && inside.producers.length === 1 && inside.producers.every((p) => p.parked), 10_000, "the producer parked");
      const c = await connect(pool, { now: clock.now });
      const id = await c.enqueue(q, {});
      await until(async () => (await readJob(pool, id)).status === "retrying", 10_000, "the first attempt failed");
      const seen = looks;
      await until(() => looks >= seen + 3, 10_000, "three looks");
      assert.equal(attempts, 1, "the retry is not due yet");
      clock.advance(10_000);
      await until(async () => (await readJob(pool, id)).status === "completed", 10_000, "the retry ran once due");
      assert.equal(attempts, 2);
    } finally {
      await w.stop();
      await counted.end();
    }
  });
});

// countStatements calls count with the text of every statement sent
// through p: by p.query, and on the connections the client borrows with
// p.connect(), where it runs each call in a READ COMMITTED transaction of
// its own when the database's default is another level
// (src/isolation.ts). p.query borrows with a callback and is counted by
// itself; the client uses one way or the other in a given database.
function countStatements(p: pg.Pool, count: (text: string) => void): void {
  type Queryable = { query: (...args: unknown[]) => unknown };
  const wrap = (target: Queryable) => {
    const query = target.query.bind(target);
    target.query = (...args: unknown[]) => {
      if (typeof args[0] === "string") count(args[0]);
      return query(...args);
    };
  };
  wrap(p as unknown as Queryable);
  const wrapped = new WeakSet<object>();
  const connect = p.connect.bind(p) as (...args: unknown[]) => unknown;
  (p as unknown as { connect: (...args: unknown[]) => unknown }).connect = (...args: unknown[]) => {
    if (args.length > 0) return connect(...args);
    return (connect() as Promise<pg.PoolClient>).then((c) => {
      if (!wrapped.has(c)) {
        wrapped.add(c);
        wrap(c as unknown as Queryable);
      }
      return c;
    });
  };
}
