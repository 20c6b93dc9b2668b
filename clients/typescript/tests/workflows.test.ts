// Workflows (docs/workflows.md) against a real PostgreSQL: a graph
// enqueued in one call, outputs, parents' outputs under each edge policy,
// progress with the heartbeat, and a handler's setOutput and
// reportProgress through the Worker.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import pg from "pg";

import { InvalidArgumentError, JobNotFoundError, RawJSON, WaitTimeoutError, Worker } from "../src/index.js";
import type { Job, OnFailure } from "../src/index.js";
import { MemoryLogger, connect, deferred, newPool, queueName, readJob, until } from "./helpers.js";

let pool: pg.Pool;
before(() => {
  pool = newPool(12);
});
after(async () => {
  await pool.end();
});

const opts = { timeout: 120_000 };

/** limitOutputs gives queue its own max_output_bytes, the smallest allowed. */
async function limitOutputs(queue: string): Promise<void> {
  await pool.query(
    "INSERT INTO backoff.queues (name, policy, max_output_bytes) VALUES ($1, 'default', 1024)",
    [queue],
  );
}

async function claimOne(c: Awaited<ReturnType<typeof connect>>, queue: string): Promise<Job> {
  const jobs = await c.claim(queue, 1, 300_000);
  assert.equal(jobs.length, 1);
  return jobs[0]!;
}

describe("workflows", () => {
  test("a fan-out/fan-in graph: blocked children, outputs, the parents' outputs", opts, async () => {
    const etl = queueName("wf-etl");
    const reports = queueName("wf-reports");
    const c = await connect(pool);
    const ids = await c.enqueueGraph([
      { ref: "extract", queue: etl, payload: { table: "orders" } },
      { ref: "load-eu", queue: etl, dependsOn: ["extract"] },
      { ref: "load-us", queue: etl, dependsOn: ["extract"] },
      { ref: "report", queue: reports, dependsOn: ["load-eu", { ref: "load-us", onFailure: "run" }] },
    ]);
    assert.deepEqual(Object.keys(ids).sort(), ["extract", "load-eu", "load-us", "report"]);
    assert.equal((await readJob(pool, ids["load-eu"]!)).status, "blocked");

    const extract = await claimOne(c, etl);
    assert.equal(extract.id, ids.extract);
    assert.equal((await c.completeWithOutput(extract.id, extract.attempt, { rows: 42 })).status, "completed");
    assert.deepEqual(await c.jobOutput(extract.id), { rows: 42 });
    assert.equal((await readJob(pool, ids["load-eu"]!)).status, "pending");

    const loads = await c.claim(etl, 2, 300_000);
    const eu = loads.find((j) => j.id === ids["load-eu"])!;
    const us = loads.find((j) => j.id === ids["load-us"])!;
    assert.deepEqual((await c.parentOutputs(eu.id)).map((p) => p.output), [{ rows: 42 }]);
    assert.deepEqual(await c.completeMany([eu.id], [eu.attempt], [{ region: "eu" }]), [eu.id]);
    await c.fail(us.id, us.attempt, "region offline", { retryable: false });

    assert.equal((await readJob(pool, ids.report!)).status, "pending");
    assert.deepEqual(await c.parentOutputs(ids.report!), [
      { parentId: ids["load-eu"], queue: etl, status: "completed", onFailure: "cancel", output: { region: "eu" } },
      { parentId: ids["load-us"], queue: etl, status: "dead_lettered", onFailure: "run", output: undefined },
    ]);
    assert.equal(await c.jobOutput(ids["load-us"]!), undefined);
    assert.deepEqual(await c.parentOutputs(ids.extract!), []);
  });

  test("dependencies on existing jobs; an unknown ref or a cycle enqueues nothing", opts, async () => {
    const q = queueName("wf-plain");
    const c = await connect(pool);
    const first = await c.enqueue(q, { n: 0 });
    // A string is a ref of the graph; an existing job is { job: id }.
    const ids = await c.enqueueGraph([
      { ref: "a", queue: q, payload: { n: 1 }, dependsOn: [{ job: first }] },
      { ref: "b", queue: q, dependsOn: ["a", { job: first, onFailure: "wait" }], priority: 2 },
    ]);
    assert.equal((await readJob(pool, ids.a!)).status, "blocked");
    assert.equal((await readJob(pool, ids.b!)).priority, 2);
    await assert.rejects(
      c.enqueueGraph([
        { ref: "x", queue: q },
        { ref: "y", queue: q, dependsOn: ["nope"] },
      ]),
      (err: unknown) => err instanceof InvalidArgumentError && /nope/.test(err.message),
    );
    await assert.rejects(
      c.enqueueGraph([
        { ref: "x", queue: q, dependsOn: ["y"] },
        { ref: "y", queue: q, dependsOn: ["x"] },
      ]),
      InvalidArgumentError,
    );
    const n = await pool.query("SELECT count(*)::int AS n FROM backoff.jobs WHERE queue = $1", [q]);
    assert.equal(n.rows[0]?.n, 3);
  });

  for (const policy of ["cancel", "run", "wait"] as OnFailure[]) {
    test(`a failed parent under on_failure ${policy}`, opts, async () => {
      const q = queueName(`wf-${policy}`);
      const c = await connect(pool);
      const ids = await c.enqueueGraph([
        { ref: "parent", queue: q },
        { ref: "child", queue: q, dependsOn: [{ ref: "parent", onFailure: policy }] },
      ]);
      const parent = await claimOne(c, q);
      await c.fail(parent.id, parent.attempt, "broken", { retryable: false });
      const child = await readJob(pool, ids.child!);
      if (policy === "cancel") {
        assert.equal(child.status, "cancelled");
        assert.match(child.lastError ?? "", new RegExp(ids.parent!));
      } else if (policy === "run") {
        assert.equal(child.status, "pending");
      } else {
        assert.equal(child.status, "blocked");
        await pool.query("SELECT backoff.unblock($1)", [ids.child]);
        assert.equal((await readJob(pool, ids.child!)).status, "pending");
      }
      const [p] = await c.parentOutputs(ids.child!);
      assert.deepEqual([p?.status, p?.onFailure, p?.output], ["dead_lettered", policy, undefined]);
    });
  }

  test("an output over the limit is refused; progress goes with a heartbeat", opts, async () => {
    const q = queueName("wf-limit");
    await limitOutputs(q);
    const c = await connect(pool);
    await c.enqueue(q);
    const job = await claimOne(c, q);
    await assert.rejects(c.completeWithOutput(job.id, job.attempt, { blob: "x".repeat(5000) }), InvalidArgumentError);
    assert.equal((await readJob(pool, job.id)).status, "running");
    await assert.rejects(c.completeWithOutput(job.id, job.attempt, 10n), InvalidArgumentError);
    await c.heartbeatProgress(job.id, job.attempt, { done: 40, of: 100 });
    const r = await pool.query("SELECT progress FROM backoff.job_progress WHERE job_id = $1", [job.id]);
    assert.deepEqual(r.rows[0]?.progress, { done: 40, of: 100 });
    await c.completeWithOutput(job.id, job.attempt, new RawJSON('{"raw": true}'));
    assert.deepEqual(await c.jobOutput(job.id), { raw: true });
  });

  test("the Worker completes with the handler's output: batched, alone, or refused and dead-lettered; progress with the heartbeat", opts, async () => {
    const q = queueName("wf-worker");
    await limitOutputs(q);
    const c = await connect(pool);
    const seenProgress = deferred();
    const ids = await c.enqueueGraph([
      { ref: "s1", queue: q, payload: { kind: "small", n: 1 } },
      { ref: "s2", queue: q, payload: { kind: "small", n: 2 } },
      { ref: "large", queue: q, payload: { kind: "large" } },
      { ref: "over", queue: q, payload: { kind: "over" } },
      { ref: "fan-in", queue: q, payload: { kind: "progress" }, dependsOn: ["s1", "s2", "large"] },
    ]);
    const worker = new Worker(pool, {
      logger: new MemoryLogger(),
      workerId: queueName("w"),
      pollIntervalMs: 50,
      queues: [
        {
          queue: q,
          concurrency: 4,
          leaseMs: 300_000,
          heartbeatIntervalMs: 50,
          handler: async (job: Job<any>, _signal, ctx) => {
            switch (job.payload.kind) {
              case "small":
                ctx.setOutput({ n: job.payload.n });
                break;
              case "large":
                ctx.setOutput({ blob: "y".repeat(500) });
                break;
              case "over":
                ctx.setOutput({ blob: "z".repeat(5000) });
                break;
              default:
                ctx.reportProgress({ done: 1 });
                await seenProgress.promise;
                ctx.setOutput((await c.parentOutputs(job.id)).map((p) => p.output));
            }
          },
        },
      ],
    });
    const ac = new AbortController();
    const done = worker.run(ac.signal);
    try {
      await until(
        async () => (await pool.query("SELECT 1 FROM backoff.job_progress WHERE job_id = $1", [ids["fan-in"]])).rowCount === 1,
        60_000,
        "progress",
      );
      seenProgress.resolve();
      await until(async () => (await readJob(pool, ids["fan-in"]!)).status === "completed", 60_000, "the fan-in job");
      await until(async () => (await readJob(pool, ids.over!)).status === "dead_lettered", 60_000, "the over-limit job");
    } finally {
      ac.abort();
      await done;
    }
    assert.deepEqual(await c.jobOutput(ids["fan-in"]!), [{ n: 1 }, { n: 2 }, { blob: "y".repeat(500) }]);
    const over = await readJob(pool, ids.over!);
    assert.equal(over.deadLetterReason, "non_retryable");
    assert.match(over.lastError ?? "", /^output refused: /);
    assert.equal(await c.jobOutput(ids.over!), undefined);
  });

  test("waitForOutput: woken by the finishing call's notification over a pool, polling on a client; finished, missing, timed out", opts, async () => {
    const q = queueName("wf-await");
    const c = await connect(pool);
    const registered = async (id: string) =>
      (await pool.query("SELECT 1 FROM backoff.job_awaiters WHERE job_id = $1", [id])).rowCount === 1;

    const id = await c.enqueue(q);
    // A poll of an hour: only the notification can end the wait in time.
    const waiting = c.waitForOutput(id, { timeoutMs: 120_000, pollIntervalMs: 3_600_000 });
    await until(() => registered(id), 60_000, "the registration");
    const job = await claimOne(c, q);
    await c.completeWithOutput(job.id, job.attempt, { rows: 42 });
    assert.deepEqual(await waiting, { id, status: "completed", output: { rows: 42 } });
    assert.deepEqual(await c.waitForOutput(id), { id, status: "completed", output: { rows: 42 } });
    await assert.rejects(c.waitForOutput(String(Number(id) + 100_000)), JobNotFoundError);

    const never = await c.enqueue(q);
    await assert.rejects(c.waitForOutput(never, { timeoutMs: 300, pollIntervalMs: 3_600_000 }), WaitTimeoutError);
    assert.equal((await pool.query("SELECT 1 FROM backoff.job_awaiters WHERE job_id = $1", [never])).rowCount, 0);

    const own = await pool.connect();
    try {
      const onClient = c.with(own);
      const polled = await c.enqueue(q);
      const w = onClient.waitForOutput(polled, { timeoutMs: 120_000, pollIntervalMs: 20 });
      await until(() => registered(polled), 60_000, "the registration");
      await c.cancel(polled, "not needed");
      assert.deepEqual(await w, { id: polled, status: "cancelled", output: undefined });
    } finally {
      own.release();
    }
  });
});
