// Database errors become the package's error classes here, and nowhere
// else: one class per SQLSTATE of the SQL API (docs/design.md#errors). Each
// keeps the driver's error as `cause` and the SQLSTATE as `code`, and its
// message starts with the operation ("claim jobs in \"emails\": ...").

import pg from "pg";

/** The base of every error the package raises for a call. */
export class BackoffError extends Error {
  /** The SQLSTATE, when the database answered with one. */
  readonly code: string | undefined;
  constructor(message: string, options?: { cause?: unknown; code?: string | undefined }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options?.code;
  }
}

/** An argument was refused (SQLSTATE 22023): an empty queue, a limit below 1, an unknown policy... */
export class InvalidArgumentError extends BackoffError {}

/** waitForOutput's deadline passed before the job finished. */
export class WaitTimeoutError extends BackoffError {}

/** No job has that id (SQLSTATE BK001). */
export class JobNotFoundError extends BackoffError {}

/**
 * The attempt (the fencing token) is not the job's running attempt: its
 * lease was reaped, or another attempt holds it (SQLSTATE BK002). A worker
 * that gets it has lost the job and must stop working on it.
 */
export class StaleAttemptError extends BackoffError {}

/**
 * The job's status does not allow the call: completing a dead-lettered
 * job, replaying a pending one (SQLSTATE BK003).
 */
export class InvalidTransitionError extends BackoffError {}

/** acquire on a job that is not due yet (SQLSTATE BK004): come back at retryAt. */
export class NotReadyError extends BackoffError {
  /** The job's run_at; null if the server's DETAIL could not be read. */
  readonly retryAt: Date | null;
  /** The job's attempts so far (its token), from the HINT "attempts=N". */
  readonly attempts: number | null;
  constructor(message: string, options: { cause: unknown; retryAt: Date | null; attempts: number | null }) {
    super(message, { cause: options.cause, code: "BK004" });
    this.retryAt = options.retryAt;
    this.attempts = options.attempts;
  }
}

/**
 * The login may not make this call (SQLSTATE 42501): its role lacks the
 * function, or backoff.grant_queue scopes it to other queues. Retrying
 * does not help.
 */
export class PermissionDeniedError extends BackoffError {}

/**
 * The queue is moving away from this shard (SQLSTATE 55006; `backoffctl
 * shards move`, docs/sharding.md): enqueue again, through the router, which
 * sends the job to the new shard once the move flips. A client on a pool
 * does so by itself (enqueue, enqueueMany and enqueueGraph, for up to
 * 10 s); on a transaction's client it cannot: the error has aborted the
 * transaction, and it is thrown at once.
 */
export class QueueMovingError extends BackoffError {}

/** The database's pgbackoff schema is missing or older than this package needs: run `backoffctl migrate up`. */
export class SchemaTooOldError extends BackoffError {}

const byCode: Record<string, new (message: string, options: { cause: unknown; code: string }) => BackoffError> = {
  "22023": InvalidArgumentError,
  BK001: JobNotFoundError,
  BK002: StaleAttemptError,
  BK003: InvalidTransitionError,
  "42501": PermissionDeniedError,
  "55006": QueueMovingError,
};

/** The SQLSTATE of a driver error, if the database sent one. */
export function sqlState(err: unknown): string | undefined {
  if (err instanceof pg.DatabaseError) return err.code;
  if (err instanceof BackoffError) return err.code;
  return undefined;
}

/**
 * translate is the one boundary where a driver error becomes the
 * package's: the documented SQLSTATEs map to the classes above, anything
 * else is a BackoffError; all keep the original as `cause`.
 */
export function translate(op: string, err: unknown): BackoffError {
  if (err instanceof BackoffError) return err;
  const text = err instanceof Error ? err.message : String(err);
  if (err instanceof pg.DatabaseError && err.code !== undefined) {
    if (err.code === "BK004") {
      return new NotReadyError(`${op}: ${text}`, {
        cause: err,
        retryAt: parseTime(err.detail),
        attempts: parseAttempts(err.hint),
      });
    }
    const cls = byCode[err.code];
    if (cls !== undefined) return new cls(`${op}: ${text}`, { cause: err, code: err.code });
    return new BackoffError(`${op}: ${text}`, { cause: err, code: err.code });
  }
  return new BackoffError(`${op}: ${text}`, { cause: err });
}

function parseTime(s: string | undefined): Date | null {
  if (s === undefined) return null;
  const t = new Date(s.trim());
  return Number.isNaN(t.getTime()) ? null : t;
}

function parseAttempts(s: string | undefined): number | null {
  const m = /attempts=(\d+)/.exec(s ?? "");
  return m?.[1] === undefined ? null : Number(m[1]);
}

/**
 * transient reports whether err may go away by itself: anything but an
 * answer of the database about the call, except the SQLSTATE classes that
 * mean the connection or the transaction failed, not the call (08
 * connection, 40 transaction rollback, 53 resources, 57 operator
 * intervention). The Worker repeats settle calls that fail with it; the
 * calls are fenced by the attempt, so a repeat after a lost reply takes
 * effect once or is refused (docs/adr/0020).
 */
export function transient(err: unknown): boolean {
  const code = sqlState(err instanceof BackoffError && err.cause !== undefined ? err.cause : err);
  if (code === undefined) {
    return !(err instanceof InvalidArgumentError) && !(err instanceof Error && err.name === "AbortError");
  }
  return ["08", "40", "53", "57"].includes(code.slice(0, 2));
}
