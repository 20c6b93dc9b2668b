// In a database whose default_transaction_isolation is REPEATABLE READ or
// SERIALIZABLE, the client runs each call over a pool at READ COMMITTED
// (docs/adr/0080); a failed call leaves its connection idle; the pool's
// connections are left as they were; a client the caller passes runs the
// call as it is, at the caller's level. Each test gets a copy of the test
// database with that default (and small segments, so that rotate switches
// after two jobs).

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, describe, test } from "node:test";

import pg from "pg";

import { JobNotFoundError } from "../src/index.js";
import type { Client } from "../src/index.js";
import { TestClock, connect, databaseURL } from "./helpers.js";

/** A statement through the client's own path (its private run). */
function run(c: Client, text: string): Promise<Record<string, any>[]> {
  return (c as unknown as { run(op: string, text: string, values: unknown[]): Promise<Record<string, any>[]> }).run(
    "probe",
    text,
    [],
  );
}

/** The level of the transaction each of three rows is read in. */
const PROBE = "SELECT current_setting('transaction_isolation') AS level FROM generate_series(1, 3)";
const RC = ["read committed", "read committed", "read committed"];

async function levels(c: Client): Promise<string[]> {
  return (await run(c, PROBE)).map((r) => r.level);
}

/** withDatabase is url with its database replaced by name. */
function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

/** copyDatabase copies the test database (its schema and settings) into a new one whose sessions start at level. */
async function copyDatabase(level: string): Promise<string> {
  const admin = new pg.Client({ connectionString: databaseURL() });
  await admin.connect();
  try {
    const source = (await admin.query("SELECT current_database() AS d")).rows[0].d as string;
    const name = `pgbackoff_ts_${randomBytes(6).toString("hex")}`;
    for (let i = 0; ; i++) {
      try {
        await admin.query(`CREATE DATABASE ${pg.escapeIdentifier(name)} TEMPLATE ${pg.escapeIdentifier(source)}`);
        break;
      } catch (err) {
        // 55006: another session (autovacuum, a test's pool closing) is on the template for a moment.
        if ((err as { code?: string }).code !== "55006" || i >= 100) throw err;
        await new Promise((r) => setTimeout(r, 50));
      }
    }
    await admin.query(
      `ALTER DATABASE ${pg.escapeIdentifier(name)} SET default_transaction_isolation = ${pg.escapeLiteral(level)}`,
    );
    return name;
  } finally {
    await admin.end();
  }
}

async function dropDatabase(name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: databaseURL() });
  await admin.connect();
  try {
    await admin.query(`DROP DATABASE IF EXISTS ${pg.escapeIdentifier(name)} WITH (FORCE)`);
  } finally {
    await admin.end();
  }
}

for (const level of ["repeatable read", "serializable"]) {
  describe(`a database whose default is ${level}`, () => {
    const names: string[] = [];
    const pools: pg.Pool[] = [];
    /**
     * pool opens a pool of one connection, so that each check sees the
     * connection the calls used, on a copy of the test database of its own.
     */
    const pool = async (onePerCall = false): Promise<pg.Pool> => {
      const name = await copyDatabase(level);
      names.push(name);
      const url = withDatabase(databaseURL(), name);
      const c = new pg.Client({ connectionString: url });
      await c.connect();
      await c.query("UPDATE backoff.settings SET segment_jobs = 2");
      assert.equal((await c.query("SHOW transaction_isolation")).rows[0].transaction_isolation, level);
      await c.end();
      const p = new pg.Pool({ connectionString: url, max: 1 });
      p.on("error", () => {});
      // Without node-postgres's pipeline mode: BEGIN, the statement and COMMIT one by one.
      if (onePerCall) p.on("connect", (c) => delete (c as { pipeline?: boolean }).pipeline);
      pools.push(p);
      return p;
    };
    after(async () => {
      await Promise.all(pools.map((p) => p.end()));
      for (const name of names) await dropDatabase(name);
    });

    for (const onePerCall of [false, true]) {
      test(`calls over a pool run at read committed${onePerCall ? ", one statement at a time" : ""}`, async () => {
        const p = await pool(onePerCall);
        const clock = new TestClock();
        const c = await connect(p, { now: clock.now });
        assert.deepEqual(await levels(c), RC);

        // The client's calls end to end, rotate's truncate included.
        const queue = `q-${onePerCall}`;
        const ids = [await c.enqueue(queue, { n: 1 }), await c.enqueue(queue, { n: 2 })];
        // The segment the jobs went to (the copy may hold the jobs of earlier tests too).
        const segment = (await p.query("SELECT segment FROM backoff.segments WHERE current")).rows[0].segment;
        assert.ok((await c.rotate()) >= 2, "two jobs fill a segment: rotate switches and moves them");
        const filenode = async () =>
          (await p.query(`SELECT pg_relation_filenode('backoff.jobs_live_${segment}') AS f`)).rows[0].f;
        const before = await filenode();
        await c.rotate();
        assert.notEqual(await filenode(), before, `rotate truncated the segment it left, ${segment}`);
        const jobs = await c.claim(queue, 2);
        assert.deepEqual(jobs.map((j) => j.id).sort(), [...ids].sort());
        assert.deepEqual(
          (await c.completeMany(jobs.map((j) => j.id), jobs.map((j) => j.attempt))).sort(),
          jobs.map((j) => j.id).sort(),
        );

        // A failing call: its error, and the connection back idle.
        await assert.rejects(run(c, "SELECT 1/0"), /division by zero/);
        await assert.rejects(c.complete("1000000000000", 1), (err: unknown) => err instanceof JobNotFoundError);
        assert.deepEqual(await levels(c), RC);

        // The pool's connection is as it was: idle, at the database's level, its pipeline mode unchanged.
        const conn = await p.connect();
        try {
          assert.equal(conn.getTransactionStatus(), "I");
          assert.equal((conn as { pipeline?: boolean }).pipeline, onePerCall ? undefined : false);
          assert.equal((await conn.query("SHOW transaction_isolation")).rows[0].transaction_isolation, level);
        } finally {
          conn.release();
        }
        assert.equal(p.totalCount, 1, "no connection was destroyed");
      });
    }

    test("a client the caller passes runs the call as it is", async () => {
      const p = await pool();
      const conn = await p.connect();
      try {
        const c = await connect(conn);
        assert.deepEqual(await levels(c), [level, level, level]);
        await conn.query("BEGIN");
        assert.deepEqual(await levels(c), [level, level, level]);
        assert.equal(conn.getTransactionStatus(), "T", "the caller's transaction stays open");
        await conn.query("ROLLBACK");
      } finally {
        conn.release();
      }
      // with() over the pool the client was made on keeps its reading of the level.
      const pc = await connect(p);
      assert.deepEqual(await levels(pc.with(p)), RC);
    });
  });
}
