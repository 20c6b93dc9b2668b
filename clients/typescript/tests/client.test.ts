// The typed calls against a real PostgreSQL: each test drives time through
// the client's clock (p_now), never by sleeping.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import pg from "pg";

import {
  BackoffError,
  Client,
  InvalidArgumentError,
  InvalidTransitionError,
  JobNotFoundError,
  NotReadyError,
  PermissionDeniedError,
  SchemaTooOldError,
  StaleAttemptError,
  cleanErrorText,
} from "../src/index.js";
import type { Queryable } from "../src/index.js";
import { TestClock, connect, newPool, queueName, quiet, readJob } from "./helpers.js";

interface Email {
  to: string;
  subject: string;
  tags: string[];
}

let pool: pg.Pool;
before(() => {
  pool = newPool();
});
after(async () => {
  await pool.end();
});

describe("connect", () => {
  test("accepts the installed schema", async () => {
    const c = await connect(pool);
    assert.ok(((await c.schemaVersion()) ?? 0) >= 5);
  });

  test("refuses an older schema and a missing one", async () => {
    const old: Queryable = { query: async () => ({ rows: [{ v: 4 }] }) as any };
    await assert.rejects(Client.connect(old), (err: unknown) => {
      assert.ok(err instanceof SchemaTooOldError);
      assert.match(err.message, /version 4, this package needs 5: run `backoffctl migrate up`/);
      return true;
    });
    // A database without the schema answers 3F000 (no such schema).
    const missing: Queryable = {
      query: (text, values) => pool.query(text.replace("backoff.", "backoff_not_installed."), values),
    };
    await assert.rejects(Client.connect(missing), (err: unknown) => {
      assert.ok(err instanceof SchemaTooOldError);
      assert.match(err.message, /it is not installed \(need version 5\)/);
      return true;
    });
  });
});

describe("enqueue", () => {
  test("one job: unicode JSON payload, run_at, priority, dedupe key, policy", async () => {
    const clock = new TestClock();
    const c = await connect(pool, { now: clock.now });
    const q = queueName("enqueue");
    const payload: Email = { to: "zoë@example.com", subject: "héllo wörld 🌍 日本語 \"quoted\" \\ back\nline", tags: ["ü", "€"] };
    const id = await c.enqueue<Email>(q, payload, { priority: 5, maxAttempts: 3, policy: "conservative" });
    assert.equal(typeof id, "string");
    const job = await readJob(pool, id);
    assert.deepEqual(job.payload, payload);
    assert.equal(job.priority, 5);
    assert.equal(job.maxAttempts, 3);
    assert.equal(job.policy, "conservative");
    assert.equal(job.status, "pending");

    // The same dedupe key while the first job is unfinished: the same id.
    const d1 = await c.enqueue(q, { n: 1 }, { dedupeKey: "order-7" });
    const d2 = await c.enqueue(q, { n: 2 }, { dedupeKey: "order-7" });
    assert.equal(d1, d2);
    assert.deepEqual((await readJob(pool, d1)).payload, { n: 1 });

    // run_at in the future: not claimable before it, claimable after.
    const later = await c.enqueue(q, undefined, { runAt: new Date(clock.now().getTime() + 60_000), priority: 100 });
    assert.deepEqual((await readJob(pool, later)).payload, {});
    const first = await c.claim<Email>(q, 1);
    assert.equal(first[0]?.id, id, "the higher priority among the due jobs first");
    assert.equal(first[0]?.payload.subject, payload.subject);
    clock.advance(61_000);
    const next = await c.claim(q, 1);
    assert.equal(next[0]?.id, later, "due now, and priority 100");
  });

  test("many jobs in one call: ids in input order, dedupe, atomic", async () => {
    const c = await connect(pool);
    const q = queueName("many");
    const runAt = new Date(Date.now() + 3_600_000);
    const ids = await c.enqueueMany([
      { queue: q, payload: { text: "Grüße 👋" } },
      { queue: q, payload: { text: "second" }, priority: 9, dedupeKey: "k" },
      { queue: q, runAt, maxAttempts: 2 },
      { queue: q, payload: { text: "same key" }, dedupeKey: "k" },
    ]);
    assert.equal(ids.length, 4);
    assert.equal(ids[3], ids[1], "the batch's second job holds the key");
    const jobs = await Promise.all(ids.map((id) => readJob(pool, id)));
    assert.deepEqual(jobs[0]?.payload, { text: "Grüße 👋" });
    assert.equal(jobs[1]?.priority, 9);
    assert.equal(jobs[2]?.runAt.getTime(), runAt.getTime());
    assert.equal(jobs[2]?.maxAttempts, 2);
    assert.deepEqual(await c.enqueueMany([]), []);

    await assert.rejects(c.enqueueMany([{ queue: q }, { queue: "" }]), InvalidArgumentError);
    const n = await pool.query("SELECT count(*)::int AS n FROM backoff.jobs WHERE queue = $1", [q]);
    assert.equal(n.rows[0].n, 3, "the failed batch added nothing");
  });

  test("inside the caller's transaction: rolled back with it, committed with it", async () => {
    const c = await connect(pool);
    const q = queueName("tx");
    const conn = await pool.connect();
    try {
      await conn.query("BEGIN");
      const gone = await c.with(conn).enqueue(q, { order: 1 });
      await conn.query("ROLLBACK");
      await assert.rejects(readJob(pool, gone), /not found/);

      await conn.query("BEGIN");
      const [a, b] = await c.with(conn).enqueueMany([{ queue: q }, { queue: q }]);
      await conn.query("COMMIT");
      assert.equal((await readJob(pool, a!)).status, "pending");
      assert.equal((await readJob(pool, b!)).status, "pending");
    } finally {
      conn.release();
    }
  });
});

describe("claim and settle", () => {
  test("claim then complete; the token fences the calls after", async () => {
    const c = await connect(pool);
    const q = queueName("complete");
    const id = await c.enqueue(q, { to: "a@example.com" });
    const [job] = await c.claim<{ to: string }>(q, 10);
    assert.ok(job);
    assert.equal(job.id, id);
    assert.equal(job.status, "running");
    assert.equal(job.attempt, 1);
    assert.equal(job.countedAttempt, 1);
    assert.equal(job.lockedBy, c.workerId);
    assert.ok(job.leaseUntil instanceof Date);
    assert.equal(job.payload.to, "a@example.com");

    const done = await c.complete(job.id, job.attempt);
    assert.equal(done.status, "completed");
    assert.ok(done.completedAt instanceof Date);
    await assert.rejects(c.complete(job.id, job.attempt), InvalidTransitionError);
  });

  test("completeMany completes what each token still holds", async () => {
    const c = await connect(pool);
    const q = queueName("many-done");
    await c.enqueueMany([{ queue: q }, { queue: q }, { queue: q }]);
    const jobs = await c.claim(q, 3);
    assert.equal(jobs.length, 3);
    const done = await c.completeMany(
      jobs.map((j) => j.id),
      jobs.map((j, i) => (i === 2 ? j.attempt + 1 : j.attempt)),
    );
    assert.deepEqual(done.sort(), jobs.slice(0, 2).map((j) => j.id).sort());
    assert.equal((await readJob(pool, jobs[2]!.id)).status, "running");
    await assert.rejects(c.completeMany(["1"], []), InvalidArgumentError);
  });

  test("completedBy names the jobs their given attempt completed, and no other", async () => {
    const c = await connect(pool);
    const q = queueName("completed-by");
    const [a, b, d] = await c.enqueueMany([{ queue: q }, { queue: q }, { queue: q }]);
    await c.claim(q, 3);
    await c.complete(a!, 1);
    await c.fail(b!, 1, "x", { retryable: false });
    assert.deepEqual(await c.completedBy([a!, b!, d!], [1, 1, 1]), [a], "b is dead-lettered, d still running");
    assert.deepEqual(await c.completedBy([a!], [2]), [], "another token did not complete a");
    assert.deepEqual(await c.completedBy([], []), []);
    await assert.rejects(c.completedBy([a!], []), InvalidArgumentError);
  });

  test("fail: retried at the policy's delay, then dead-lettered at max_attempts", async () => {
    const clock = new TestClock();
    const c = await connect(pool, { now: clock.now });
    const q = queueName("fail");
    const id = await c.enqueue(q, {}, { maxAttempts: 2 });
    const [j1] = await c.claim(q);
    const failed = await c.fail(id, j1!.attempt, "smtp timeout");
    assert.equal(failed.status, "retrying");
    assert.ok(failed.runAt.getTime() > clock.now().getTime());
    assert.equal(failed.lastError, "smtp timeout");
    assert.equal(failed.errors[0]?.attempt, 1);
    assert.equal(failed.errors[0]?.counted, 1);
    assert.equal(failed.errors[0]?.worker, c.workerId);

    assert.equal((await c.claim(q)).length, 0, "not due before its delay");
    clock.advance(failed.runAt.getTime() - clock.now().getTime() + 1);
    const [j2] = await c.claim(q);
    assert.equal(j2?.attempt, 2);
    const dead = await c.fail(id, 2, "smtp timeout again");
    assert.equal(dead.status, "dead_lettered");
    assert.equal(dead.deadLetterReason, "max_attempts");
  });

  test("fail not retryable dead-letters at once; retryIn asks for its own delay", async () => {
    const clock = new TestClock();
    const c = await connect(pool, { now: clock.now });
    const q = queueName("steer");
    const [a, b] = await c.enqueueMany([{ queue: q }, { queue: q }]);
    await c.claim(q, 2);
    const dead = await c.fail(a!, 1, "bad address", { retryable: false });
    assert.equal(dead.status, "dead_lettered");
    assert.equal(dead.deadLetterReason, "non_retryable");

    const later = await c.fail(b!, 1, "429 Too Many Requests", { retryInMs: 7_000 });
    assert.equal(later.status, "retrying");
    assert.equal(later.runAt.getTime() - later.lastFailedAt!.getTime(), 7_000);
    assert.equal(later.runAt.getTime() - clock.now().getTime(), 7_000);
  });

  test("snooze puts the job back without spending an attempt; the old token is refused", async () => {
    const clock = new TestClock();
    const c = await connect(pool, { now: clock.now });
    const q = queueName("snooze");
    const id = await c.enqueue(q);
    const [j1] = await c.claim(q);
    const snoozed = await c.snooze(id, j1!.attempt, 60_000);
    assert.equal(snoozed.status, "pending");
    assert.equal(snoozed.attempt, 1, "the token is spent");
    assert.equal(snoozed.countedAttempt, 0, "the budget is not");
    assert.equal(snoozed.runAt.getTime() - clock.now().getTime(), 60_000);

    assert.equal((await c.claim(q)).length, 0);
    clock.advance(60_001);
    const [j2] = await c.claim(q);
    assert.equal(j2?.attempt, 2);
    assert.equal(j2?.countedAttempt, 1);
    await assert.rejects(c.snooze(id, 1, 1_000), StaleAttemptError);
  });

  test("heartbeat keeps the lease: reap leaves the job while it is extended", async () => {
    const clock = new TestClock();
    const c = await connect(pool, { now: clock.now });
    const q = queueName("heartbeat");
    const id = await c.enqueue(q);
    const start = clock.now().getTime();
    const [job] = await c.claim(q, 1, 20_000);
    assert.equal(job!.leaseUntil!.getTime(), start + 20_000);

    clock.advance(15_000);
    const until = await c.heartbeat(id, job!.attempt, 40_000);
    assert.equal(until.getTime(), start + 55_000);
    clock.advance(25_000); // 40 s after the claim: past the first lease, within the extended one
    await c.reap();
    const held = await readJob(pool, id);
    assert.equal(held.status, "running");
    assert.equal(held.attempt, 1);

    clock.advance(20_000); // 60 s: past the extended lease
    await c.reap();
    const reaped = await readJob(pool, id);
    assert.equal(reaped.status, "retrying");
    assert.equal(reaped.leaseExpiries, 1);
    assert.equal(reaped.errors[0]?.kind, "lease_expired");
    await assert.rejects(c.heartbeat(id, job!.attempt), StaleAttemptError);
  });

  test("cancel, and an error text the database could not store as given", async () => {
    const c = await connect(pool);
    const q = queueName("text");
    const [a, b] = await c.enqueueMany([{ queue: q }, { queue: q }]);
    await c.claim(q, 2);
    const long = "NUL\u0000 then ü".repeat(1_000);
    const failed = await c.fail(a!, 1, long, { retryable: false });
    assert.equal(failed.lastError, cleanErrorText(long));
    assert.match(failed.lastError!, /\uFFFD then ü/);
    assert.match(failed.lastError!, / \[truncated: \d+ bytes\]$/);
    const cancelled = await c.cancel(b!, "not needed");
    assert.equal(cancelled.status, "cancelled");
    assert.equal(cancelled.lastError, "not needed");
  });
});

describe("errors", () => {
  test("each SQLSTATE of the API is its class, naming the call", async () => {
    const clock = new TestClock();
    const c = await connect(pool, { now: clock.now });
    const q = queueName("errors");

    await assert.rejects(c.enqueue(""), (err: unknown) => {
      assert.ok(err instanceof InvalidArgumentError);
      assert.equal(err.code, "22023");
      assert.match(err.message, /^enqueue job in "": /);
      assert.ok(err.cause instanceof pg.DatabaseError);
      return true;
    });
    await assert.rejects(c.claim(q, 0), InvalidArgumentError);
    await assert.rejects(c.claim(q, 1, Number.NaN), InvalidArgumentError);
    await assert.rejects(c.complete("987654321098", 1), (err: unknown) => {
      assert.ok(err instanceof JobNotFoundError);
      assert.equal(err.code, "BK001");
      return true;
    });

    const id = await c.enqueue(q, {}, { runAt: new Date(clock.now().getTime() + 3_600_000) });
    await assert.rejects(c.acquire(id), (err: unknown) => {
      assert.ok(err instanceof NotReadyError);
      assert.equal(err.code, "BK004");
      assert.equal(err.retryAt?.getTime(), clock.now().getTime() + 3_600_000);
      assert.equal(err.attempts, 0);
      return true;
    });
    clock.advance(3_600_000);
    const job = await c.acquire(id, 10_000);
    assert.equal(job.attempt, 1);
    await assert.rejects(c.acquire(id), StaleAttemptError, "running: BK002");
    await assert.rejects(c.complete(id, 2), (err: unknown) => err instanceof StaleAttemptError && err.code === "BK002");
    await c.complete(id, 1);
    await assert.rejects(c.fail(id, 1, "late"), (err: unknown) => err instanceof InvalidTransitionError && err.code === "BK003");
    await assert.rejects(c.replay(id), InvalidTransitionError, "a completed job is not replayed");

    // A login without the worker's functions: 42501.
    const conn = await pool.connect();
    try {
      await conn.query("SET ROLE backoff_producer");
      await assert.rejects(c.with(conn).claim(q), (err: unknown) => {
        assert.ok(err instanceof PermissionDeniedError);
        assert.equal(err.code, "42501");
        return true;
      });
    } finally {
      conn.release(true);
    }
  });

  test("an error that is not an answer of the API is a BackoffError with its cause", async () => {
    const broken: Queryable = {
      query: async () => {
        throw Object.assign(new Error("connect ECONNREFUSED 127.0.0.1:1"), { code: "ECONNREFUSED" });
      },
    };
    await assert.rejects(Client.connect(broken), (err: unknown) => {
      assert.ok(err instanceof BackoffError);
      assert.equal(err.code, undefined);
      assert.match(err.message, /^check pgbackoff schema: connect ECONNREFUSED/);
      return true;
    });
  });
});

describe("operator calls", () => {
  test("stats counts a queue's jobs; replay brings a dead letter back with a fresh budget", async () => {
    const c = await connect(pool);
    const q = queueName("ops");
    const [done, dead, waiting] = await c.enqueueMany([{ queue: q }, { queue: q }, { queue: q }]);
    await c.acquire(done!);
    await c.complete(done!, 1);
    await c.acquire(dead!);
    await c.fail(dead!, 1, "bad payload", { retryable: false });

    const row = (await c.stats(60_000)).find((s) => s.queue === q);
    assert.deepEqual(row, {
      queue: q,
      pending: 1,
      running: 0,
      retrying: 0,
      completed: 1,
      deadLettered: 1,
      cancelled: 0,
      due: 1,
      oldestDueAgeMs: row!.oldestDueAgeMs,
      retries: 0,
      deadLetters: 1,
      expired: 0,
      paused: false,
      blocked: 0,
    });
    assert.ok(row!.oldestDueAgeMs >= 0);
    // A job that waits for another is blocked.
    await c.enqueueGraph([
      { ref: "parent", queue: q },
      { ref: "child", queue: q, dependsOn: ["parent"] },
    ]);
    await c.pauseQueue(q);
    const later = (await c.stats()).find((s) => s.queue === q);
    assert.deepEqual([later!.blocked, later!.expired, later!.paused], [1, 0, true]);
    await c.resumeQueue(q);

    const replayed = await c.replay(dead!);
    assert.equal(replayed.status, "pending");
    assert.equal(replayed.attempt, 1);
    assert.equal(replayed.countedAttempt, 0);
    assert.equal(replayed.errors.length, 2, "the history is kept, and the replay recorded");
    assert.equal(replayed.errors[1]!.kind, "replayed");
    const again = await c.acquire(dead!);
    assert.equal(again.attempt, 2, "the token keeps counting");
    assert.equal(again.countedAttempt, 1);
    await assert.rejects(c.replay(waiting!), InvalidTransitionError);

    // The whole queue's dead letters at once.
    await c.fail(dead!, 2, "still bad", { retryable: false });
    await c.acquire(waiting!);
    await c.fail(waiting!, 1, "bad too", { retryable: false });
    const outcomes = await c.replayDeadLetters(q);
    assert.deepEqual(
      outcomes,
      [dead!, waiting!].sort((a, b) => Number(BigInt(a) - BigInt(b))).map((jobId) => ({ jobId, replayed: true, reason: null })),
    );
  });

  test("pause, resume and the queue's state", async () => {
    const c = await connect(pool);
    const q = queueName("pause");
    await c.enqueue(q);
    assert.equal(await c.pauseQueue(q), true);
    assert.equal((await c.claim(q)).length, 0);
    const st = await c.queueState(q);
    assert.equal(st.state, "closed");
    assert.equal(st.nextClaimAt, null, "a pause has no end time");
    assert.ok(st.readAt instanceof Date);
    assert.equal(await c.resumeQueue(q), true);
    assert.equal((await c.claim(q)).length, 1);
  });

  test("a rate-limited queue says when the next claim can return a job", async () => {
    const clock = new TestClock();
    const c = await connect(pool, { now: clock.now });
    const q = queueName("rate");
    await pool.query("INSERT INTO backoff.queues (name, policy, rate, burst) VALUES ($1, 'default', 0.5, 1)", [q]);
    await c.enqueueMany([{ queue: q }, { queue: q }]);
    assert.equal((await c.claim(q, 2)).length, 1, "one token");
    const st = await c.queueState(q);
    assert.equal(st.rate, 0.5);
    assert.ok(st.tokens !== null && st.tokens < 1);
    assert.equal(st.nextClaimAt!.getTime() - st.readAt.getTime(), 2_000);
    clock.advance(2_000);
    assert.equal((await c.claim(q, 2)).length, 1, "the next token");
  });

  test("waitForJobs registers the worker, stopWaiting ends it", async () => {
    const c = await connect(pool);
    const q = queueName("wait");
    const until = await c.waitForJobs(q, 30_000);
    assert.ok(until.getTime() > Date.now() - 60_000);
    assert.equal(await c.stopWaiting(q), true);
    assert.equal(await c.stopWaiting(q), false);
  });
});

describe("thin by design", () => {
  test("every statement the client sends is one call of a backoff.* function", async () => {
    const sent: string[] = [];
    const recording: Queryable = {
      query: (text, values) => {
        sent.push(text);
        return pool.query(text, values);
      },
    };
    const clock = new TestClock();
    const c = await Client.connect(recording, { now: clock.now, logger: quiet });
    const q = queueName("thin");
    const [a, b, d] = await c.enqueueMany([{ queue: q }, { queue: q }, { queue: q }]);
    await c.enqueue(q, { x: 1 });
    await c.claim(q, 1);
    await c.acquire(b!);
    await c.heartbeat(b!, 1);
    await c.snooze(b!, 1, 0);
    await c.acquire(b!);
    await c.fail(b!, 2, "x", { retryable: false });
    await c.replay(b!);
    await c.acquire(d!);
    await c.complete(d!, 1);
    await c.completeMany([a!], [1]);
    await c.completedBy([a!], [1]);
    await c.cancel(b!);
    await c.replayDeadLetters(q);
    await c.reap();
    await c.stats();
    await c.queueState(q);
    await c.pauseQueue(q);
    await c.resumeQueue(q);
    await c.waitForJobs(q, 30_000);
    await c.stopWaiting(q);
    await c.prune(86_400_000, 1);
    assert.ok(sent.length >= 22);
    for (const text of sent) {
      assert.match(text, /^SELECT [^;]* backoff\.[a-z_]+\(|^SELECT backoff\.[a-z_]+\(/, text);
      assert.equal((text.match(/backoff\.[a-z_]+\(/g) ?? []).length, 1, `one function call: ${text}`);
      assert.doesNotMatch(text, /backoff\.jobs|\b(UPDATE|INSERT|DELETE)\b/i, text);
    }
  });
});
