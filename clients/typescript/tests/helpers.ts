// Test helpers: the database under test, unique queue names, a clock the
// tests move, and reads of backoff.jobs for assertions (the package itself
// never reads the table; its tests may).

import { randomBytes } from "node:crypto";

import pg from "pg";

import { Client } from "../src/sql.js";
import type { ClientOptions, Job } from "../src/types.js";
import { toJob } from "../src/sql.js";

/**
 * The database: TEST_DATABASE_URL, with the pgbackoff schema installed
 * (`psql -v ON_ERROR_STOP=1 -1 -f dist/backoff.sql`), reached as a login
 * that may pass any p_now (a backoff_admin member such as a superuser, or
 * backoff.settings.time_injection on). Without it the tests fail: a run
 * that tested nothing must not pass.
 */
export function databaseURL(): string {
  const url = process.env.TEST_DATABASE_URL;
  if (url === undefined || url === "") {
    throw new Error("TEST_DATABASE_URL is not set: the tests need a PostgreSQL database with the pgbackoff schema");
  }
  return url;
}

/**
 * newPool opens a pool on the test database; the caller ends it.
 * readCommitted starts its sessions at READ COMMITTED whatever the
 * database's default, so that each call is the one pool.query a test that
 * spies on pool.query sees (elsewhere the client runs each call on a
 * connection of the pool, with its BEGIN and COMMIT: src/isolation.ts).
 */
export function newPool(max = 10, { readCommitted = false } = {}): pg.Pool {
  const pool = new pg.Pool({
    connectionString: databaseURL(),
    max,
    ...(readCommitted ? { options: "-c default_transaction_isolation=read\\ committed" } : {}),
  });
  // An idle connection the server drops must not crash the test process.
  pool.on("error", () => {});
  return pool;
}

/** queueName is a queue no other test (or earlier run on the same database) uses. */
export function queueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString("hex")}`;
}

/** A clock the test moves by hand, for p_now. */
export class TestClock {
  private t: number;
  constructor(start = Date.now()) {
    this.t = start;
  }
  now = (): Date => new Date(this.t);
  advance(ms: number): void {
    this.t += ms;
  }
}

/** connect makes a client on db with a fresh worker id. */
export function connect(db: pg.Pool | pg.PoolClient, opts: ClientOptions = {}): Promise<Client> {
  return Client.connect(db, { workerId: queueName("worker"), logger: quiet, ...opts });
}

/** readJob reads a job's row as it is now. */
export async function readJob(pool: pg.Pool, id: string): Promise<Job> {
  const r = await pool.query(
    "SELECT id, queue, payload, status, priority, attempts, uncounted_attempts, max_attempts, policy, run_at, " +
      "lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors, dead_letter_reason, " +
      "dedupe_key, lease_expiries, created_at, completed_at FROM backoff.jobs WHERE id = $1",
    [id],
  );
  if (r.rows[0] === undefined) throw new Error(`job ${id} not found`);
  return toJob(r.rows[0]);
}

/** A logger that keeps what it is told, for assertions, and prints nothing. */
export class MemoryLogger {
  lines: { level: string; message: string; fields?: Record<string, unknown> }[] = [];
  debug = (message: string, fields?: Record<string, unknown>) => this.add("debug", message, fields);
  info = (message: string, fields?: Record<string, unknown>) => this.add("info", message, fields);
  warn = (message: string, fields?: Record<string, unknown>) => this.add("warn", message, fields);
  error = (message: string, fields?: Record<string, unknown>) => this.add("error", message, fields);
  private add(level: string, message: string, fields?: Record<string, unknown>) {
    this.lines.push(fields === undefined ? { level, message } : { level, message, fields });
  }
}

export const quiet = new MemoryLogger();

/** until polls cond (real time, for a worker's side effects) and fails after ms. */
export async function until(cond: () => Promise<boolean> | boolean, ms = 10_000, what = "condition"): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await cond()) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${ms}ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** deferred is a promise with its resolve function outside. */
export function deferred<T = void>(): { promise: Promise<T>; resolve: (v: T) => void } {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}
