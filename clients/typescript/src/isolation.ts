// The queue's functions are written for READ COMMITTED (docs/adr/0080): a
// claim's FOR UPDATE SKIP LOCKED follows a row another session updated
// instead of failing, and rotate truncates only there. A database whose
// default_transaction_isolation is REPEATABLE READ or SERIALIZABLE would run
// each call at that level, where claims and settles under contention end
// in serialization failures. Over a pool whose sessions start at another
// level, the client therefore runs each statement in a READ COMMITTED
// transaction of its own, on one of the pool's connections. A pg.Client or
// pg.PoolClient the caller passes runs the statement as it is: the caller
// chose its transaction and level.

import type pg from "pg";

import type { Queryable } from "./types.js";

/** A pg.Pool, as far as the client needs one: it lends connections. */
export interface ConnectionLender extends Queryable {
  connect(): Promise<pg.PoolClient>;
}

/**
 * isPool tells a pg.Pool from a pg.Client or pg.PoolClient: both have
 * query and connect, only a pool counts its clients.
 */
export function isPool(db: Queryable): db is ConnectionLender {
  const d = db as Partial<pg.Pool>;
  return typeof d.connect === "function" && typeof d.totalCount === "number";
}

/** Reads the level the sessions start their transactions at. */
export const READ_DEFAULT_LEVEL = "current_setting('default_transaction_isolation')";

const BEGIN = "BEGIN ISOLATION LEVEL READ COMMITTED";

/** The piece of a pg.Client this file switches: node-postgres's pipeline mode (pg 8.2x and later). */
interface Pipelining {
  pipeline?: unknown;
}

/**
 * readCommitted runs one statement as BEGIN ISOLATION LEVEL READ
 * COMMITTED, the statement, COMMIT on one connection of pool, and returns
 * its rows. Where node-postgres has pipeline mode, the three are written
 * at once, one round trip: each ends with its own Sync, so a failed
 * statement leaves the transaction aborted and the COMMIT ends it, as a
 * rollback. Elsewhere they go one after the other (ROLLBACK after a failed
 * statement). A connection left in a transaction is rolled back, or
 * destroyed when that fails, so that the pool only ever gets it back idle.
 */
export async function readCommitted(pool: ConnectionLender, text: string, values: unknown[]): Promise<pg.QueryResult> {
  const conn = await pool.connect();
  let destroy: Error | undefined;
  try {
    const [begin, statement, end] = await (typeof (conn as Pipelining).pipeline === "boolean"
      ? pipelined(conn, text, values)
      : oneByOne(conn, text, values));
    destroy = await idle(conn, end?.status === "fulfilled");
    for (const r of [begin, statement, end]) {
      if (r?.status === "rejected") throw r.reason;
    }
    return (statement as PromiseFulfilledResult<pg.QueryResult>).value;
  } finally {
    conn.release(destroy);
  }
}

type Settled = PromiseSettledResult<pg.QueryResult> | undefined;

async function pipelined(conn: pg.PoolClient, text: string, values: unknown[]): Promise<Settled[]> {
  const c = conn as Pipelining;
  const was = c.pipeline;
  c.pipeline = true;
  try {
    return await Promise.allSettled([conn.query(BEGIN), conn.query(text, values), conn.query("COMMIT")]);
  } finally {
    c.pipeline = was;
  }
}

async function oneByOne(conn: pg.PoolClient, text: string, values: unknown[]): Promise<Settled[]> {
  const begin = await settle(conn.query(BEGIN));
  if (begin.status === "rejected") return [begin, undefined, undefined];
  const statement = await settle(conn.query(text, values));
  return [begin, statement, await settle(conn.query(statement.status === "fulfilled" ? "COMMIT" : "ROLLBACK"))];
}

function settle<T>(p: Promise<T>): Promise<PromiseSettledResult<T>> {
  return p.then(
    (value) => ({ status: "fulfilled", value }),
    (reason: unknown) => ({ status: "rejected", reason }),
  );
}

/**
 * idle makes sure conn is out of any transaction before it goes back to
 * the pool, and returns the error to destroy it with when it may not be:
 * in a transaction after a failed ROLLBACK, or, where node-postgres does
 * not tell the transaction status, when the COMMIT or ROLLBACK did not
 * succeed.
 */
async function idle(conn: pg.PoolClient, ended: boolean): Promise<Error | undefined> {
  const status: string | null | undefined =
    typeof conn.getTransactionStatus === "function" ? conn.getTransactionStatus() : undefined;
  if (status === "I") return undefined;
  if (status === "T" || status === "E") {
    try {
      await conn.query("ROLLBACK");
      return undefined;
    } catch (err) {
      return err instanceof Error ? err : new Error(String(err));
    }
  }
  return ended ? undefined : new Error("the connection's transaction state is unknown after a failed call");
}
