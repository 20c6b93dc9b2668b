// The notifier holds a Worker's one LISTEN connection, shared by all its
// queues, and the registrations that tell enqueuers a queue has a waiting
// worker (docs/adr/0027-wake-ups-only-for-waiting-workers.md).
//
// backoff.enqueue notifies only when a worker has registered with
// backoff.wait_for_jobs that it waits for the queue, so a busy system sends
// no notification at all. A producer registers when a claim finds its queue
// empty (and looks once more, for a job enqueued before the registration
// was visible), and ends the registration with backoff.stop_waiting when
// two claims in a row find jobs. A registration also expires, so one left
// by a worker that died costs little; an idle producer renews it at its
// poll ticks.

import type pg from "pg";

import type { Client } from "./sql.js";
import type { Logger } from "./types.js";
import { sleep } from "./sleep.js";

/** The channel backoff.enqueue notifies, with the queue's name as payload. */
export const NOTIFY_CHANNEL = "backoff_jobs";

export class Notifier {
  /** Whether LISTEN is in effect: a notification would reach this worker now. */
  listening = false;
  private readonly renewed = new Map<string, number>();

  private relistening: (() => void) | undefined;

  constructor(
    /** pools are where to LISTEN: the Worker's pool, or in direct mode its queues' shards'. */
    private readonly pools: () => pg.Pool[],
    private readonly client: Client,
    private readonly log: Logger,
    private readonly pollIntervalMs: number,
    /** wake is called with a queue's name (or "" for all) when it may have work. */
    private readonly wake: (queue: string) => void,
  ) {}

  /** How long a registration lasts unrenewed: an idle producer renews it at a poll tick before then. */
  get ttlMs(): number {
    return Math.max(30_000, 3 * this.pollIntervalMs);
  }

  /**
   * setWaiting writes (waiting) or ends this worker's registration for
   * queue. A failure is logged: the poll interval still bounds how late a
   * job starts.
   */
  async setWaiting(queue: string, waiting: boolean): Promise<void> {
    try {
      if (waiting) {
        await this.client.waitForJobs(queue, this.ttlMs);
        this.renewed.set(queue, Date.now());
      } else {
        await this.client.stopWaiting(queue);
        this.renewed.delete(queue);
      }
    } catch (err) {
      this.log.warn("could not record whether the worker waits; polling covers it", { queue, waiting, err });
    }
  }

  /** refresh renews an idle queue's registration once a third of its ttl has passed. */
  async refresh(queue: string): Promise<void> {
    if (!this.listening) return;
    const at = this.renewed.get(queue);
    if (at === undefined || Date.now() - at > this.ttlMs / 3) await this.setWaiting(queue, true);
  }

  /**
   * relisten ends the LISTEN connections and opens them again where pools
   * says now, and forgets the registrations so that idle producers write
   * them again: the queues' shards changed.
   */
  relisten(): void {
    this.renewed.clear();
    this.relistening?.();
  }

  /** unregisterAll ends the registrations still held, at shutdown. */
  async unregisterAll(): Promise<void> {
    for (const queue of [...this.renewed.keys()]) await this.setWaiting(queue, false);
  }

  /**
   * listen wakes producers when backoff.enqueue notifies, until signal
   * aborts. It holds one connection of the pool and reconnects after an
   * error; polling covers the gap.
   */
  async listen(signal: AbortSignal): Promise<void> {
    let retryMs = 100;
    while (!signal.aborted) {
      let err: unknown;
      let again = false;
      try {
        again = await this.listenOnce(signal);
      } catch (e) {
        err = e;
      }
      this.listening = false;
      if (signal.aborted) return;
      if (again) {
        retryMs = 100;
        continue;
      }
      this.log.warn("listen failed; polling until it reconnects", { err, retryInMs: retryMs });
      await sleep(retryMs, signal);
      retryMs = Math.min(retryMs * 2, 30_000);
    }
  }

  /** listenOnce listens until signal aborts (false) or relisten is asked (true); it throws when a connection fails. */
  private async listenOnce(signal: AbortSignal): Promise<boolean> {
    const conns: pg.PoolClient[] = [];
    let onAbort: (() => void) | undefined;
    let again = false;
    try {
      for (const pool of this.pools()) conns.push(await pool.connect());
      await new Promise<void>((resolve, reject) => {
        for (const conn of conns) {
          conn.on("error", reject);
          conn.on("end", () => reject(new Error("the listen connection closed")));
          conn.on("notification", (msg) => {
            if (msg.channel === NOTIFY_CHANNEL) this.wake(msg.payload ?? "");
          });
        }
        onAbort = resolve;
        signal.addEventListener("abort", onAbort, { once: true });
        this.relistening = () => {
          again = true;
          resolve();
        };
        if (signal.aborted) return resolve();
        Promise.all(conns.map((conn) => conn.query(`LISTEN ${NOTIFY_CHANNEL}`))).then(() => {
          this.listening = true;
          // Look again: anything enqueued before LISTEN took effect, and a
          // producer that found its queue empty registers now.
          this.wake("");
        }, reject);
      });
    } finally {
      this.listening = false;
      this.relistening = undefined;
      if (onAbort !== undefined) signal.removeEventListener("abort", onAbort);
      // Never back to the pool: the connection carries the subscription.
      for (const conn of conns) conn.release(true);
    }
    return again;
  }
}
