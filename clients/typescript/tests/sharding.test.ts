// Direct mode behind a router (src/sharding.ts): the hash rule, a job id's
// shard, the layout, a shard's pool options; and a Worker in direct mode
// against the test database made to look like a router of one shard
// (itself), and against one that is not a router.

import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import pg from "pg";

import { Client } from "../src/sql.js";
import { NotARouterError, Worker, hashShard, jobShard, queueShard, readLayout } from "../src/index.js";
import { parseConninfo, shardPoolConfig } from "../src/sharding.js";
import { MemoryLogger, connect, databaseURL, newPool, queueName, until } from "./helpers.js";

// The Go twin's answers (client/sharding QueueShard) for n = 3, 4, 1000.
const VECTORS: [string, number[]][] = [
  ["emails", [0, 3, 119]],
  ["invoices", [1, 2, 314]],
  ["a", [0, 1, 177]],
  ["", [2, 1, 745]],
  ["déjà-vu", [1, 3, 131]],
  ["queue-17", [1, 2, 502]],
];

const opts = { timeout: 120_000 };

describe("sharding rules", () => {
  test("hashShard is the router's hash rule", () => {
    for (const [q, want] of VECTORS) assert.deepEqual([hashShard(q, 3), hashShard(q, 4), hashShard(q, 1000)], want, q);
  });

  test("jobShard is the id's high bits", () => {
    assert.equal(jobShard("5"), 0);
    assert.equal(jobShard(String((1n << 48n) - 1n)), 0);
    assert.equal(jobShard(String(1n << 48n)), 1);
    assert.equal(jobShard(String((2n << 48n) + 12345n)), 2);
    assert.equal(jobShard(String((7n << 48n) | ((1n << 48n) - 1n))), 7);
  });

  test("a placed queue lives on its shard, another on the hash of hash_shards", () => {
    const layout = { version: 3, hashShards: 3, shards: 4, placed: new Map([["emails", 3]]), addresses: new Map<number, string>() };
    assert.equal(queueShard(layout, "emails"), 3);
    assert.equal(queueShard(layout, "invoices"), 1);
    assert.equal(queueShard(layout, "queue-17"), 1);
  });

  test("parseConninfo reads keywords, quoted values too", () => {
    assert.deepEqual(
      [...parseConninfo("host=10.0.0.7 port=5433 dbname='my db' hostaddr='1.2.3.4'")],
      [["host", "10.0.0.7"], ["port", "5433"], ["dbname", "my db"], ["hostaddr", "1.2.3.4"]],
    );
  });

  test("a shard's pool takes only the address from the shard", () => {
    const base: pg.PoolConfig = {
      connectionString: "postgres://app:secret@router.example:6432/jobs?sslmode=require&application_name=w1",
      host: "router.example",
      port: 6432,
      database: "jobs",
      user: "app",
      max: 12,
      statement_timeout: 5000,
    };
    const cfg = shardPoolConfig(base, "host=10.0.0.7 port=5433 dbname=shard2 user=other", 7);
    assert.equal(cfg.host, "10.0.0.7");
    assert.equal(cfg.port, 5433);
    assert.equal(cfg.database, "shard2");
    assert.equal(cfg.user, "app");
    assert.equal(cfg.max, 7);
    assert.equal(cfg.statement_timeout, 5000);
    const url = new URL(cfg.connectionString!);
    assert.equal(url.hostname, "10.0.0.7");
    assert.equal(url.port, "5433");
    assert.equal(url.pathname, "/shard2");
    assert.equal(url.username, "app");
    assert.equal(url.password, "secret");
    assert.equal(url.searchParams.get("sslmode"), "require");
    assert.equal(url.searchParams.get("application_name"), "w1");
    // A socket directory goes in the host parameter; hostaddr wins over host.
    const sock = new URL(shardPoolConfig({ connectionString: "postgres://u@r/jobs?host=/tmp" }, "host=/var/run/postgresql dbname=s", 3).connectionString!);
    assert.equal(sock.searchParams.get("host"), "/var/run/postgresql");
    assert.equal(sock.pathname, "/s");
    assert.equal(shardPoolConfig({ host: "a" }, "host=b hostaddr=10.9.9.9 port=1", 3).host, "10.9.9.9");
  });
});

describe("direct mode on a database", () => {
  let pool: pg.Pool;
  before(() => {
    pool = newPool(12);
  });
  after(async () => {
    await unmakeRouter(pool);
    await pool.end();
  });

  test("a pool that is not a router's is refused", opts, async () => {
    await assert.rejects(readLayout(pool), NotARouterError);
    const worker = new Worker(pool, { queues: [{ queue: "q", handler: async () => {} }], directShards: true, logger: new MemoryLogger() });
    await assert.rejects(worker.run(new AbortController().signal), /not a pgbackoff router's/);
  });

  test("the database as its own only shard: claims and completions go through the shard's pool", opts, async () => {
    const placed = queueName("placed");
    await makeRouterOfItself(pool, placed);
    const layout = await readLayout(pool);
    assert.equal(layout.version, 7);
    assert.equal(layout.hashShards, 1);
    assert.deepEqual([...layout.placed], [[placed, 0]]);
    assert.match(layout.addresses.get(0)!, /dbname=/);

    const client = await connect(pool);
    const hashed = queueName("hashed");
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await client.enqueue(placed, { i }), await client.enqueue(hashed, { i }));

    const used = { claim: new Set<unknown>(), completeMany: new Set<unknown>() };
    const claim = Client.prototype.claim;
    const completeMany = Client.prototype.completeMany;
    Client.prototype.claim = function (this: Client, ...args: Parameters<Client["claim"]>) {
      used.claim.add((this as unknown as { db: unknown }).db);
      return claim.apply(this, args);
    } as typeof claim;
    Client.prototype.completeMany = function (this: Client, ...args: Parameters<Client["completeMany"]>) {
      used.completeMany.add((this as unknown as { db: unknown }).db);
      return completeMany.apply(this, args);
    } as typeof completeMany;
    const seen: string[] = [];
    const worker = new Worker(pool, {
      queues: [
        { queue: placed, handler: async (job) => void seen.push(job.id) },
        { queue: hashed, handler: async (job) => void seen.push(job.id) },
      ],
      directShards: true,
      pollIntervalMs: 50,
      logger: new MemoryLogger(),
    });
    const ac = new AbortController();
    const done = worker.run(ac.signal);
    let shard: pg.Pool | undefined;
    try {
      await until(
        async () => (await pool.query("SELECT count(*)::int AS n FROM backoff.jobs WHERE id = ANY($1) AND status = 'completed'", [ids])).rows[0].n === ids.length,
        60_000,
        "every job completed",
      );
      const shards = (worker as unknown as { shards: { pools: Map<number, pg.Pool> } }).shards;
      assert.deepEqual([...shards.pools.keys()], [0]);
      shard = shards.pools.get(0);
      assert.notEqual(shard, pool);
    } finally {
      ac.abort();
      await done;
      Client.prototype.claim = claim;
      Client.prototype.completeMany = completeMany;
    }
    assert.deepEqual(seen.sort(), ids.sort());
    assert.deepEqual([...used.claim], [shard]);
    assert.deepEqual([...used.completeMany], [shard]);
    assert.equal(shard!.ended, true, "run ends the shard pools");
  });
});

/** makeRouterOfItself gives the test database a router's layout of one shard: itself. */
async function makeRouterOfItself(pool: pg.Pool, placed: string): Promise<void> {
  const url = new URL(databaseURL());
  const host = url.searchParams.get("host") ?? url.hostname;
  const address = [`host=${host}`, url.port ? `port=${url.port}` : "", `dbname=${decodeURIComponent(url.pathname.slice(1))}`]
    .filter(Boolean)
    .join(" ");
  await unmakeRouter(pool);
  await pool.query(`CREATE TABLE backoff.router_layout (version bigint, hash_shards integer, shards integer);
    INSERT INTO backoff.router_layout VALUES (7, 1, 1);
    CREATE TABLE backoff.router_placements (queue text PRIMARY KEY, shard integer);
    INSERT INTO backoff.router_placements VALUES (${pg.escapeLiteral(placed)}, 0);
    CREATE FUNCTION backoff.router_shards(OUT shard integer, OUT conninfo text) RETURNS SETOF record
      LANGUAGE sql AS $$ SELECT 0, ${pg.escapeLiteral(address)}::text $$`);
}

async function unmakeRouter(pool: pg.Pool): Promise<void> {
  await pool.query(`DROP TABLE IF EXISTS backoff.router_layout, backoff.router_placements;
    DROP FUNCTION IF EXISTS backoff.router_shards()`);
}
