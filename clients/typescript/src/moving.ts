// Enqueues of a queue that is moving to another shard, tried again on a
// pool (docs/sharding.md, "Moving a queue that has jobs").

import { QueueMovingError } from "./errors.js";
import { sleep } from "./sleep.js";

/**
 * A move refuses enqueues of the queue on its old shard (QueueMovingError,
 * SQLSTATE 55006) from its mark until the router's placement flips, a few
 * statements later (longer while the old shard still has transactions open
 * from before the mark, which the mover waits for; docs/adr/0092). A client
 * on a pool runs each call in a transaction of its own, so it enqueues
 * again: through the router the next try goes to the queue's new shard
 * once the move has flipped. These bound how long it tries: for waitMs at
 * most, with pauses from firstPauseMs doubling up to maxPauseMs.
 */
export const queueMoveRetry = {
  waitMs: 10_000,
  firstPauseMs: 10,
  maxPauseMs: 250,
};

/**
 * retryWhileMoving runs enqueue again while it fails with
 * QueueMovingError, for at most queueMoveRetry.waitMs; then it throws the
 * last QueueMovingError.
 */
export async function retryWhileMoving<T>(enqueue: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + queueMoveRetry.waitMs;
  let pause = queueMoveRetry.firstPauseMs;
  for (;;) {
    try {
      return await enqueue();
    } catch (err) {
      const left = deadline - Date.now();
      if (!(err instanceof QueueMovingError) || left <= 0) throw err;
      await sleep(Math.min(pause, left));
    }
    pause = Math.min(2 * pause, queueMoveRetry.maxPauseMs);
  }
}
