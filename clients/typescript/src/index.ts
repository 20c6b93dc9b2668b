// pgbackoff for TypeScript: typed calls of the backoff.* SQL functions and a
// Worker over node-postgres. Every decision (retry or dead-letter, the delay,
// what is due) is taken in SQL; see docs/adr/0064-typescript-package.md.

export { Client, FINISHED_CHANNEL, REQUIRED_SCHEMA, RawJSON, cleanErrorText } from "./sql.js";
export { HandlerContext, Worker, defineQueue, connectionsNeeded } from "./worker.js";
export type { Handler, QueueConfig, WorkerConfig } from "./worker.js";
export { NOTIFY_CHANNEL } from "./notifier.js";
export { NotARouterError, hashShard, jobShard, queueShard, readLayout } from "./sharding.js";
export type { Layout } from "./sharding.js";
export {
  BackoffError,
  InvalidArgumentError,
  InvalidTransitionError,
  JobNotFoundError,
  NotReadyError,
  PermissionDeniedError,
  QueueMovingError,
  SchemaTooOldError,
  StaleAttemptError,
  WaitTimeoutError,
} from "./errors.js";
export {
  LeaseExpiredError,
  LeaseLostError,
  PermanentError,
  RetryAfterError,
  SnoozeError,
  WorkerShutdownError,
} from "./outcome.js";
export type * from "./types.js";
