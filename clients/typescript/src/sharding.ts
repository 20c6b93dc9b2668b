// Direct mode behind a PL/Proxy router (docs/sharding.md): a Worker given
// directShards reads the router's layout once and sends its claims and
// its settling calls straight to the shards, with the pool's own user,
// password, TLS and other settings at each shard's address.
//
// The rules are the router's: a queue placed explicitly
// (backoff.router_placements) lives on its shard, any other on hashShard
// of the layout's hash_shards; a job lives on the shard in its id's high
// bits (jobShard). A layout change (a placement, a queue moved) raises
// backoff.router_layout.version: the Worker reads the version again when a
// claim finds fewer jobs than asked (at most once a second) and at each
// maintenance tick, and reads the whole layout again when it changed.

import { createHash } from "node:crypto";

import pg from "pg";

import { BackoffError } from "./errors.js";
import { Client } from "./sql.js";
import type { ClientOptions, JobId } from "./types.js";

/** A job id's shard is its bits above this one (docs/adr/0034). */
export const SHARD_SHIFT = 48n;

/** At most one read of the layout's version per this many ms from claims that found fewer jobs than asked. */
export const FOLLOW_EVERY_MS = 1000;
/** ... and per this many from the maintenance ticks, which come every second when idle: an idle Worker reads it 0.2 times a second. */
export const FOLLOW_IDLE_EVERY_MS = 5000;

/** The pool given with directShards is not a pgbackoff router's, or the router lacks a shard a queue or job needs. */
export class NotARouterError extends BackoffError {}

/**
 * hashShard is the router's hash rule (backoff._hash_shard): the first four
 * bytes of the MD5 of the queue's name, big-endian, as a non-negative
 * int32, modulo n. Only for a queue that is not placed, with n the
 * layout's hash_shards.
 */
export function hashShard(queue: string, n: number): number {
  const d = createHash("md5").update(queue, "utf8").digest();
  return (d.readUInt32BE(0) & 0x7fffffff) % n;
}

/** jobShard is the shard that holds a job: its id's high bits. */
export function jobShard(id: JobId): number {
  return Number(BigInt(id) >> SHARD_SHIFT);
}

/** A router's layout as one read saw it. */
export interface Layout {
  version: number;
  hashShards: number;
  shards: number;
  /** Queues placed explicitly, with their shards. */
  placed: Map<string, number>;
  /** Each shard's address (host, hostaddr, port, dbname only). */
  addresses: Map<number, string>;
}

/** queueShard is the shard that holds queue: its placement, else the hash rule. */
export function queueShard(layout: Layout, queue: string): number {
  return layout.placed.get(queue) ?? hashShard(queue, layout.hashShards);
}

/** parseConninfo reads a libpq keyword/value connection string (values may be single-quoted, with backslash escapes). */
export function parseConninfo(s: string): Map<string, string> {
  const out = new Map<string, string>();
  const re = /\s*([A-Za-z_]+)\s*=\s*(?:'((?:[^'\\]|\\.)*)'|([^\s']+))/gy;
  let m: RegExpExecArray | null;
  while ((m = re.exec(s)) !== null) {
    out.set(m[1]!, m[2] !== undefined ? m[2].replace(/\\(.)/g, "$1") : m[3]!);
  }
  return out;
}

/**
 * shardPoolConfig is base (the router pool's options: user, password, ssl,
 * application_name, ...) pointed at a shard: its host (hostaddr when
 * given), port and database replace base's, in a connectionString too.
 */
export function shardPoolConfig(base: pg.PoolConfig, address: string, max: number): pg.PoolConfig {
  const at = parseConninfo(address);
  const host = at.get("hostaddr") ?? at.get("host");
  const port = at.get("port");
  const database = at.get("dbname");
  const cfg: pg.PoolConfig = { ...base, max };
  delete cfg.host;
  delete cfg.port;
  delete cfg.database;
  if (host !== undefined) cfg.host = host;
  if (port !== undefined) cfg.port = Number(port);
  if (database !== undefined) cfg.database = database;
  if (cfg.connectionString !== undefined) {
    const url = new URL(cfg.connectionString);
    for (const k of ["host", "hostaddr", "port", "dbname"]) url.searchParams.delete(k);
    if (host !== undefined && host.startsWith("/")) {
      // A socket directory: pg reads it from the host parameter.
      url.hostname = "localhost";
      url.searchParams.set("host", host);
    } else if (host !== undefined) {
      url.hostname = host.includes(":") ? `[${host}]` : host;
    }
    url.port = port ?? "";
    url.pathname = database !== undefined ? `/${encodeURIComponent(database)}` : "";
    cfg.connectionString = url.toString();
  }
  return cfg;
}

const NOT_A_ROUTER =
  "the pool is not a pgbackoff router's: its database has no backoff.router_layout (directShards needs a pool on a router, docs/sharding.md)";

/** readLayout reads a router's layout and its shards' addresses in one transaction. NotARouterError when it is not a router. */
export async function readLayout(pool: pg.Pool): Promise<Layout> {
  const conn = await pool.connect();
  try {
    await conn.query("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY");
    const is = await conn.query<{ is: boolean }>("SELECT to_regclass('backoff.router_layout') IS NOT NULL AS is");
    if (!is.rows[0]?.is) throw new NotARouterError(`read the router's layout: ${NOT_A_ROUTER}`);
    const l = await conn.query<{ version: string; hash_shards: number; shards: number }>(
      "SELECT version, hash_shards, shards FROM backoff.router_layout",
    );
    const row = l.rows[0];
    if (row === undefined) throw new NotARouterError("read the router's layout: backoff.router_layout has no row");
    const p = await conn.query<{ queue: string; shard: number }>("SELECT queue, shard FROM backoff.router_placements");
    const s = await conn.query<{ shard: number; conninfo: string }>("SELECT shard, conninfo FROM backoff.router_shards()");
    await conn.query("COMMIT");
    return {
      version: Number(row.version),
      hashShards: row.hash_shards,
      shards: row.shards,
      placed: new Map(p.rows.map((r) => [r.queue, r.shard])),
      addresses: new Map(s.rows.map((r) => [r.shard, r.conninfo])),
    };
  } catch (err) {
    await conn.query("ROLLBACK").catch(() => undefined);
    throw err;
  } finally {
    conn.release();
  }
}

/**
 * Shards is a Worker's pools and clients on the shards of a router, opened
 * for the shards its queues live on (and kept until close).
 */
export class Shards {
  layout: Layout | undefined;
  readonly pools = new Map<number, pg.Pool>();
  private readonly clients = new Map<number, Client>();
  private lastFollow = 0;
  private following: Promise<boolean> | undefined;

  constructor(
    private readonly router: pg.Pool,
    private readonly queues: string[],
    private readonly size: number,
    private readonly opts: ClientOptions,
  ) {}

  /** open reads the layout and connects to the served queues' shards. */
  async open(): Promise<Layout> {
    const layout = await readLayout(this.router);
    for (const q of this.queues) {
      const k = queueShard(layout, q);
      if (!layout.addresses.has(k)) throw new NotARouterError(`connect to shard ${k} of queue ${JSON.stringify(q)}: the router lists no such shard`);
    }
    for (const q of this.queues) await this.connect(layout, queueShard(layout, q));
    this.layout = layout;
    return layout;
  }

  /** queueShard is the shard of a served queue in the layout read last. */
  queueShard(queue: string): number {
    return queueShard(this.current(), queue);
  }

  /** served is the served queues' shards with their addresses. */
  served(): Map<number, string> {
    const layout = this.current();
    const out = new Map<number, string>();
    for (const q of this.queues) {
      const k = queueShard(layout, q);
      const a = layout.addresses.get(k);
      if (a !== undefined) out.set(k, a);
    }
    return out;
  }

  /** forQueue is the client on a served queue's shard. */
  forQueue(queue: string): Client {
    return this.client(this.queueShard(queue));
  }

  /** forJob is the client on a job's shard: one the worker claimed from, so it is open. */
  forJob(id: JobId): Client {
    return this.client(jobShard(id));
  }

  /**
   * follow reads the layout's version (at most once per FOLLOW_EVERY_MS,
   * or FOLLOW_IDLE_EVERY_MS from a maintenance tick) and, when it changed,
   * the layout again, connecting to the served queues' new shards. True
   * when it changed.
   */
  async follow(tick: boolean): Promise<boolean> {
    // One at a time: a claim's and the maintenance loop's share the read.
    if (this.following !== undefined) return this.following;
    const now = Date.now();
    if (now - this.lastFollow < (tick ? FOLLOW_IDLE_EVERY_MS : FOLLOW_EVERY_MS)) return false;
    this.lastFollow = now;
    this.following = this.readVersion().finally(() => (this.following = undefined));
    return this.following;
  }

  private async readVersion(): Promise<boolean> {
    const r = await this.router.query<{ version: string }>("SELECT version FROM backoff.router_layout");
    if (this.layout !== undefined && Number(r.rows[0]?.version) === this.layout.version) return false;
    await this.open();
    return true;
  }

  /** poolConfig is the config of a pool on a shard, from the router pool's options. */
  poolConfig(address: string): pg.PoolConfig {
    return shardPoolConfig(this.router.options as pg.PoolConfig, address, this.size);
  }

  async close(): Promise<void> {
    const pools = [...this.pools.values()];
    this.pools.clear();
    this.clients.clear();
    await Promise.all(pools.map((p) => p.end()));
  }

  private current(): Layout {
    if (this.layout === undefined) throw new NotARouterError("the router's layout is not read yet");
    return this.layout;
  }

  private client(shard: number): Client {
    const c = this.clients.get(shard);
    if (c === undefined) throw new NotARouterError(`shard ${shard}: not connected (the router's layout has no such shard)`);
    return c;
  }

  private async connect(layout: Layout, shard: number): Promise<void> {
    if (this.clients.has(shard)) return;
    const address = layout.addresses.get(shard);
    if (address === undefined) throw new NotARouterError(`connect to shard ${shard}: the router lists no such shard`);
    const pool = new pg.Pool(this.poolConfig(address));
    // An idle connection the shard drops must not end the process (an
    // 'error' event without a listener throws); the next call reconnects.
    pool.on("error", (err) => this.opts.logger?.warn("an idle connection to a shard failed", { shard, err }));
    try {
      this.clients.set(shard, await Client.connect(pool, this.opts));
    } catch (err) {
      await pool.end().catch(() => undefined);
      throw err;
    }
    this.pools.set(shard, pool);
  }
}
