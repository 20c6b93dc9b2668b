// Enqueues of a queue that is moving away from this shard (SQLSTATE 55006):
// a client on a pool enqueues again until the move lets it, a client on a
// transaction's client throws QueueMovingError at once. The queue is marked
// as the mover marks a shard it leaves (backoff._transfer_mark,
// docs/adr/0092), and the mark is removed after each test: the tests share
// one database.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import pg from "pg";

import { Client, QueueMovingError } from "../src/index.js";
import { queueMoveRetry } from "../src/moving.js";
import { connect, newPool, queueName, until } from "./helpers.js";

let pool: pg.Pool;
let admin: pg.Pool;
before(() => {
  // READ COMMITTED sessions: each call is one pool.query, which the tests count.
  pool = newPool(10, { readCommitted: true });
  admin = newPool(2);
});
after(async () => {
  await pool.end();
  await admin.end();
});

/** mark marks queue as moving to shard 2, as the mover does on the shard it leaves. */
async function mark(queue: string): Promise<void> {
  await admin.query("SELECT backoff._transfer_mark($1, 'out', 2, 1)", [queue]);
}

/** unmark removes the queue's mark (a NULL direction). */
async function unmark(queue: string): Promise<void> {
  await admin.query("SELECT backoff._transfer_mark($1, NULL, NULL, NULL)", [queue]);
}

/** countEnqueues counts the enqueue statements sent through db.query. */
function countEnqueues(db: { query: (...args: any[]) => any }): { n: number } {
  const seen = { n: 0 };
  const query = db.query.bind(db);
  db.query = (...args: any[]) => {
    if (typeof args[0] === "string" && args[0].includes("backoff.enqueue")) seen.n++;
    return query(...args);
  };
  return seen;
}

const enqueues: Record<string, (c: Client, q: string) => Promise<unknown>> = {
  enqueue: (c, q) => c.enqueue(q, { n: 1 }),
  enqueueMany: (c, q) => c.enqueueMany([{ queue: q, payload: { n: 1 } }, { queue: q }]),
  enqueueGraph: (c, q) =>
    c.enqueueGraph([
      { ref: "a", queue: q },
      { ref: "b", queue: q, dependsOn: ["a"] },
    ]),
};

async function jobsOf(queue: string): Promise<number> {
  return Number((await admin.query("SELECT count(*) AS n FROM backoff.jobs WHERE queue = $1", [queue])).rows[0].n);
}

describe("a queue moving to another shard", () => {
  for (const [method, enqueue] of Object.entries(enqueues)) {
    test(`${method} in a transaction throws QueueMovingError at once`, async () => {
      const q = queueName("moving");
      const c = await connect(pool);
      await mark(q);
      const tx = await pool.connect();
      try {
        await tx.query("BEGIN");
        const seen = countEnqueues(tx);
        const start = Date.now();
        await assert.rejects(enqueue(c.with(tx), q), (err: unknown) => {
          assert.ok(err instanceof QueueMovingError, String(err));
          assert.equal(err.code, "55006");
          assert.match(err.message, /moves to shard 2/);
          return true;
        });
        assert.equal(seen.n, 1, "not tried again in the caller's transaction");
        assert.ok(Date.now() - start < queueMoveRetry.waitMs / 2);
        await tx.query("ROLLBACK");
      } finally {
        delete (tx as { query?: unknown }).query;
        tx.release();
        await unmark(q);
      }
    });

    test(`${method} on a pool gives up with QueueMovingError after the bound`, async () => {
      const q = queueName("moving");
      const c = await connect(pool);
      const wait = queueMoveRetry.waitMs;
      queueMoveRetry.waitMs = 300;
      const seen = countEnqueues(pool);
      await mark(q);
      try {
        const start = Date.now();
        await assert.rejects(enqueue(c, q), QueueMovingError);
        assert.ok(Date.now() - start >= 300, "tried until the bound");
        assert.ok(seen.n > 1, `tried again (${seen.n} tries)`);
        assert.equal(await jobsOf(q), 0);
      } finally {
        queueMoveRetry.waitMs = wait;
        delete (pool as { query?: unknown }).query; // back to pg.Pool.prototype.query
        await unmark(q);
      }
    });
  }

  test("enqueue on a pool returns the job once the mark is gone", async () => {
    const q = queueName("moving");
    const c = await connect(pool);
    const seen = countEnqueues(pool);
    await mark(q);
    let settled = false;
    try {
      const pending = c.enqueue(q, { n: 1 }).finally(() => (settled = true));
      pending.catch(() => {});
      await until(() => seen.n >= 3, queueMoveRetry.waitMs / 2, "the enqueue tried again");
      assert.equal(settled, false, "still refused while marked");
      await unmark(q);
      const id = await pending;
      const row = await admin.query("SELECT queue FROM backoff.jobs WHERE id = $1", [id]);
      assert.equal(row.rows[0]?.queue, q);
    } finally {
      delete (pool as { query?: unknown }).query;
      await unmark(q);
    }
  });
});
