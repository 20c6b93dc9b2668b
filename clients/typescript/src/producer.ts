// A producer claims the jobs of one queue into its free handler slots; it
// follows the Go Worker's producer (client/producer.go, docs/adr/0026,
// 0027, 0047).
//
// It claims whenever a slot is free and the queue was not found empty: a
// finished handler frees a slot and triggers the next claim at once, and a
// short claim is no reason to wait. Only a claim that returns nothing backs
// off. It then asks backoff.queue_state when a claim can next return a job:
// when next_claim_at is ahead (an open breaker, a rate limit out of tokens)
// the producer holds the queue until then and ignores every wake-up. Else
// the queue is idle: it registers as waiting (backoff.wait_for_jobs), looks
// once more, and sleeps until a notification, a reaped lease or the poll
// interval wakes it. Two claims in a row that find jobs end the
// registration (backoff.stop_waiting).
//
// A queue found drained (idle, nothing holding it) parks while the
// Worker's look runs (docs/adr/0083): it leaves its poll to the Worker,
// which asks backoff.next_work about every parked queue at once each poll
// interval and wakes those with a job due (and renews their
// registrations), so an idle Worker costs one statement a poll interval,
// not two per queue.

import type { Client } from "./sql.js";
import type { Notifier } from "./notifier.js";
import type { Job, Logger } from "./types.js";

/** A queue's settings with the defaults filled in. */
export interface QueueSettings {
  queue: string;
  concurrency: number;
  batchSize: number;
  leaseMs: number | undefined;
}

/** What a producer needs of its Worker. */
export interface ProducerHost {
  client: Client;
  log: Logger;
  notifier: Notifier;
  pollIntervalMs: number;
  /** lookOn: the Worker's look runs, so a drained queue may park. */
  lookOn(): boolean;
  /** claimed: a claim found jobs (the Worker is busy). */
  claimed(): void;
  /** start runs a claimed job's handler. */
  start(p: Producer, job: Job): void;
  /** forQueue is where the queue's claims go (its shard in direct mode). */
  forQueue(queue: string): Client;
  /** fewer: a claim found fewer jobs than asked (direct mode follows the router's layout). */
  fewer(): Promise<void>;
}

export class Producer {
  /** Handlers of this queue running now. */
  inflight = 0;
  private idle = false; // a claim found nothing since the last backlog; registered as waiting
  private streak = 0; // claims in a row that found jobs
  // The hold: until when the queue's controls keep claims from returning
  // jobs, on the client's clock (holdUntil) and as a real-time timer
  // (holdTimerAt); whichever ends first ends it.
  private holdUntil: number | undefined;
  private holdTimerAt: number | undefined;
  private halfOpen = false; // the last state read was a half-open breaker
  // The breaker is half open with every probe out: no time ends that, a
  // probe's result does (a freed slot, a committed completion, the poll).
  private awaitProbe = false;
  // The last state read showed no rate limit and a closed breaker, so a
  // short claim means the queue is drained.
  private uncontrolled = false;
  private stateFailed = false;
  // A rate-limited queue showed a whole token after an empty claim: claim
  // once more before calling it idle (lookedAgain: done since the last find).
  private lookAgain = false;
  private lookedAgain = false;
  // The last claim found the queue drained; parked: drained and waiting
  // for the Worker's look, a notification or a freed slot, not its poll.
  private drained = false;
  parked = false;
  private events = { wake: false, freed: false, settled: false };
  private waiter: (() => void) | undefined;

  constructor(
    private readonly host: ProducerHost,
    readonly cfg: QueueSettings,
  ) {}

  /** wake: a notification or a reap; look for work now. */
  wake(): void {
    this.events.wake = true;
    this.poke();
  }

  /** freed: a handler of this queue has returned and its outcome is recorded (or queued). */
  freed(): void {
    this.inflight--;
    this.events.freed = true;
    this.poke();
  }

  /**
   * settled: the completer committed completions of this queue; a producer
   * waiting for a probe's result looks again. Kept until read, so a commit
   * between an empty claim and the state read still counts.
   */
  settled(): void {
    this.events.settled = true;
    this.poke();
  }

  private poke(): void {
    const w = this.waiter;
    this.waiter = undefined;
    w?.();
  }

  /** run claims until signal aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const { log, notifier, pollIntervalMs } = this.host;
    const { queue, concurrency, batchSize } = this.cfg;
    const onAbort = () => this.poke();
    signal.addEventListener("abort", onAbort);
    let nextPoll = Date.now() + pollIntervalMs;
    let empty = false; // the queue had nothing due at the last look
    try {
      while (!signal.aborted) {
        const wasHeld = this.holdUntil !== undefined;
        if (this.held() || this.awaitProbe) {
          empty = true;
        } else if (wasHeld) {
          // The hold ended on the clock before its timer: claim now.
          empty = false;
        }
        const free = concurrency - this.inflight;
        if (free > 0 && !empty) {
          const want = Math.min(free, batchSize);
          let n = 0;
          let failed = false;
          this.drained = false;
          try {
            n = await this.claim(want);
          } catch (err) {
            log.error("claim failed", { queue, err });
            failed = true;
          }
          this.streak = n === 0 ? 0 : this.streak + 1;
          if (failed) {
            empty = true; // wait for the poll before trying again
          } else if (n > 0) {
            this.lookedAgain = false;
            // Two claims in a row that found jobs: a backlog, enqueuers
            // need not wake this queue. A trickle keeps the registration.
            if (this.idle && this.streak >= 2) {
              this.idle = false;
              await notifier.setWaiting(queue, false);
            }
            if (n < want && this.trickle()) {
              empty = true; // took all that was due; the next enqueue notifies
              this.drained = true;
            } else {
              continue;
            }
          } else if (await this.controlled()) {
            empty = true; // held by its controls: wait for the hold's end
          } else if (this.lookAgain) {
            this.lookAgain = false;
            continue;
          } else if (!this.idle && notifier.listening) {
            // Empty: register as waiting, then look once more, for a job
            // enqueued before the registration was visible.
            this.idle = true;
            await notifier.setWaiting(queue, true);
            continue;
          } else {
            empty = true;
            this.drained = true;
          }
        }

        // A drained queue leaves its poll to the Worker's look, which wakes
        // it when a job comes due and renews its registration.
        const parked = empty && this.drained && this.holdUntil === undefined && !this.awaitProbe && this.host.lookOn();
        this.parked = parked;
        await this.waitUntil(parked ? Infinity : Math.min(nextPoll, this.holdTimerAt ?? Infinity), signal);
        this.parked = false;
        if (signal.aborted) break;
        const now = Date.now();
        const ev = this.events;
        this.events = { wake: false, freed: false, settled: false };
        if (ev.wake) empty = false;
        if (parked) {
          nextPoll = now + pollIntervalMs;
        } else if (now >= nextPoll) {
          nextPoll = now + pollIntervalMs;
          empty = false;
          this.awaitProbe = false;
          if (this.idle) await notifier.refresh(queue);
        }
        if (ev.freed && this.halfOpen) {
          // The slot freed may be a half-open breaker's probe, failed.
          empty = false;
          this.awaitProbe = false;
        }
        if (ev.settled && this.awaitProbe) {
          // A completion of this queue: maybe the probe's, which closed it.
          empty = false;
          this.awaitProbe = false;
        }
        if (this.holdTimerAt !== undefined && now >= this.holdTimerAt) {
          // The wait the database gave has passed: claim, even if an
          // injected clock stands still.
          this.release();
          empty = false;
        }
      }
    } finally {
      signal.removeEventListener("abort", onAbort);
      this.release();
    }
  }

  /** waitUntil returns at the deadline (ms since the epoch), at an event, or when signal aborts. */
  private async waitUntil(deadline: number, signal: AbortSignal): Promise<void> {
    const ev = this.events;
    if (signal.aborted || ev.wake || ev.freed || ev.settled) return;
    let timer: NodeJS.Timeout | undefined;
    await new Promise<void>((resolve) => {
      this.waiter = resolve;
      if (deadline !== Infinity) timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
    });
    clearTimeout(timer);
    this.waiter = undefined;
  }

  /** claim takes up to n jobs and starts a handler for each; it returns how many. */
  private async claim(n: number): Promise<number> {
    const jobs = await this.host.forQueue(this.cfg.queue).claim(this.cfg.queue, n, this.cfg.leaseMs);
    if (jobs.length > 0) this.host.claimed();
    // A queue that moved gives no claims on its old shard.
    if (jobs.length < n) await this.host.fewer();
    for (const job of jobs) this.host.start(this, job);
    return jobs.length;
  }

  /**
   * controlled is called after a claim that returned nothing: it reads the
   * queue's state and reports whether its controls hold it (next_claim_at
   * ahead), and if so starts the hold. A failed read holds nothing.
   */
  private async controlled(): Promise<boolean> {
    const { client, log } = this.host;
    // The hold counts from the clock read before the state: a clock that
    // moves during the read must not push it past next_claim_at.
    const readAt = client.clock().getTime();
    let st;
    try {
      st = await client.queueState(this.cfg.queue);
    } catch (err) {
      // Logged once as an error, then at debug level.
      (this.stateFailed ? log.debug : log.error).call(log, "read queue state failed; the queue is treated as idle", {
        queue: this.cfg.queue,
        err,
      });
      this.stateFailed = true;
      this.uncontrolled = false;
      return false;
    }
    // The wait is measured on the clock the state was read with.
    const waitMs = st.nextClaimAt === null ? 0 : Math.max(0, st.nextClaimAt.getTime() - st.readAt.getTime());
    this.halfOpen = st.state === "half_open";
    this.uncontrolled = st.state === "closed" && st.rate === null;
    if (this.halfOpen && st.probesLeft === 0 && waitMs <= 0) {
      this.awaitProbe = true;
      await this.unregister();
      return true;
    }
    if (waitMs <= 0) {
      // A token may have come just after the empty claim: claim once more
      // before calling the queue idle (a second empty claim with tokens
      // means nothing is due, so this cannot spin).
      this.lookAgain = st.rate !== null && st.tokens !== null && st.tokens >= 1 && !this.lookedAgain;
      this.lookedAgain = this.lookAgain;
      return false;
    }
    this.release();
    this.holdUntil = readAt + waitMs;
    this.holdTimerAt = Date.now() + waitMs;
    log.debug("queue held by its controls", { queue: this.cfg.queue, breaker: st.state, waitMs });
    await this.unregister();
    return true;
  }

  /**
   * trickle is called after a claim that came back short: whether to wait
   * for the next wake-up instead of claiming again at once. Yes when the
   * producer is registered (every job enqueued since notifies it), its queue
   * showed no controls, and no notification came while it claimed.
   */
  private trickle(): boolean {
    if (!this.idle || !this.uncontrolled || this.held() || this.awaitProbe) return false;
    if (this.events.wake) {
      this.events.wake = false;
      return false;
    }
    this.streak = 0;
    return true;
  }

  /** unregister ends a held queue's registration: its wake-ups are ignored, so nobody should send them. */
  private async unregister(): Promise<void> {
    if (this.idle) {
      this.idle = false;
      await this.host.notifier.setWaiting(this.cfg.queue, false);
    }
  }

  /** held reports whether the controls still hold the queue, on the client's clock. */
  private held(): boolean {
    if (this.holdUntil === undefined) return false;
    if (this.host.client.clock().getTime() < this.holdUntil) return true;
    this.release();
    return false;
  }

  private release(): void {
    this.holdUntil = undefined;
    this.holdTimerAt = undefined;
  }
}
