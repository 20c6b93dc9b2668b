// What a handler's return means for its job, read in one place
// (readOutcome): the Worker records it without looking at the error again.
// The package never decides a retry or computes a delay: it reports, and
// backoff.fail decides.
//
//   - the handler returns: the job is completed;
//   - throw new PermanentError(reason): dead-lettered now (non_retryable);
//   - throw new RetryAfterError(ms, reason): retried after ms (capped at the
//     policy's max) instead of the policy's delay, e.g. an HTTP Retry-After;
//   - throw new SnoozeError(ms): put back, due after ms, without spending an
//     attempt;
//   - anything else thrown: retried after the policy's delay, or
//     dead-lettered when attempts or the policy's deadline are exhausted.
//
// The classes may also sit in the `cause` chain of what is thrown.

/** A handler throws it when retrying cannot help: the job is dead-lettered at once. */
export class PermanentError extends Error {
  constructor(reason: unknown) {
    super(`permanent: ${errorText(reason)}`, reason instanceof Error ? { cause: reason } : undefined);
    this.name = "PermanentError";
  }
}

/**
 * A handler throws it to fail the attempt but ask for the next one after
 * delayMs instead of the policy's delay (the database caps it at the
 * policy's max). The attempt is spent as with any failure.
 */
export class RetryAfterError extends Error {
  readonly delayMs: number;
  constructor(delayMs: number, reason: unknown = "retry requested") {
    const d = Math.max(0, delayMs);
    super(`retry after ${d}ms: ${errorText(reason)}`, reason instanceof Error ? { cause: reason } : undefined);
    this.name = "RetryAfterError";
    this.delayMs = d;
  }
}

/**
 * A handler throws it for "not yet" rather than "failed": the job is put
 * back, due after delayMs, without spending an attempt (the next claim has
 * a new token and the same countedAttempt). A job that snoozes forever runs
 * forever, so bound it in the handler.
 */
export class SnoozeError extends Error {
  readonly delayMs: number;
  constructor(delayMs: number) {
    const d = Math.max(0, delayMs);
    super(`snoozed for ${d}ms`);
    this.name = "SnoozeError";
    this.delayMs = d;
  }
}

/** The signal's reason when the database refused a heartbeat: the attempt no longer holds the job. */
export class LeaseLostError extends Error {
  constructor(message = "pgbackoff: lease lost") {
    super(message);
    this.name = "LeaseLostError";
  }
}

/** The signal's reason when the lease ran out without a successful heartbeat. */
export class LeaseExpiredError extends Error {
  constructor() {
    super("pgbackoff: lease expired");
    this.name = "LeaseExpiredError";
  }
}

/** The signal's reason when the worker shuts down and the shutdown timeout has passed. */
export class WorkerShutdownError extends Error {
  constructor() {
    super("pgbackoff: worker shutdown");
    this.name = "WorkerShutdownError";
  }
}

export type Outcome =
  | { kind: "completed"; output?: string | undefined }
  | { kind: "snoozed"; delayMs: number }
  | { kind: "permanent"; text: string }
  | { kind: "failed"; text: string; retryInMs: number | undefined };

/** readOutcome classifies what a handler threw (undefined: it returned); a completion carries the output it set (JSON text). */
export function readOutcome(thrown: unknown, threw: boolean, output?: string): Outcome {
  if (!threw) return output === undefined ? { kind: "completed" } : { kind: "completed", output };
  const snooze = find(thrown, SnoozeError);
  if (snooze !== undefined) return { kind: "snoozed", delayMs: snooze.delayMs };
  const text = errorText(thrown);
  if (find(thrown, PermanentError) !== undefined) return { kind: "permanent", text };
  return { kind: "failed", text, retryInMs: find(thrown, RetryAfterError)?.delayMs };
}

/** find returns the first error of class cls in err's cause chain. */
function find<E extends Error>(err: unknown, cls: abstract new (...args: any[]) => E): E | undefined {
  for (let e = err, depth = 0; e !== undefined && e !== null && depth < 16; depth++) {
    if (e instanceof cls) return e;
    e = e instanceof Error ? e.cause : undefined;
  }
  return undefined;
}

/**
 * errorText is what the job's history records for a thrown value: an
 * Error's message (prefixed with its name when it is not a plain Error,
 * "TypeError: ..."), else the value as a string.
 */
export function errorText(v: unknown): string {
  if (v instanceof Error) {
    // The package's own classes say what they are in their message.
    const plain = [
      "Error",
      "PermanentError",
      "RetryAfterError",
      "SnoozeError",
      "LeaseLostError",
      "LeaseExpiredError",
      "WorkerShutdownError",
    ].includes(v.name);
    const msg = v.message === "" ? v.name : v.message;
    return plain || v.message === "" ? msg : `${v.name}: ${msg}`;
  }
  return String(v);
}
