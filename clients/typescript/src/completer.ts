// The completer batches the completions of every queue of a Worker into
// backoff.complete_many calls: completions that arrive while one call runs
// (or in the same turn of the event loop) share the next statement, so
// there is no added latency when idle and one statement per burst under
// load (docs/adr/0013, 0026).

import type { JobId, Logger } from "./types.js";
import { RawJSON, type Client } from "./sql.js";

/** The most completions one complete_many call carries. */
const MAX_BATCH = 5000;

interface Completion {
  id: JobId;
  attempt: number;
  queue: string;
  /** The output, as JSON text of at most BATCHED_OUTPUT_BYTES; undefined: none. */
  output: string | undefined;
}

/**
 * An output whose JSON text is at most this long rides the batch: as jsonb
 * it stays under 1 KiB (a value's binary form takes at most about five
 * times its shortest text), the smallest max_output_bytes a queue may
 * have, so it cannot be refused and fail the whole batch. A larger one is
 * completed by a call of its own, as the Go Worker does.
 */
export const BATCHED_OUTPUT_BYTES = 128;

export class Completer {
  private queued: Completion[] = [];
  private flushing: Promise<void> | undefined;
  private stopped = false;

  constructor(
    /** clientFor is where a job's completion goes: its shard's client in direct mode, else the one client. */
    private readonly clientFor: (id: JobId) => Client,
    private readonly log: Logger,
    /** repeat runs a call again while it fails with a transient error. */
    private readonly repeat: <R>(call: () => Promise<R>) => Promise<R>,
    /** committed is told which queues had completions written. */
    private readonly committed: (queues: Set<string>) => void,
  ) {}

  /** add queues a completion; false once stopped, and the caller completes the job itself. */
  add(id: JobId, attempt: number, queue: string, output?: string): boolean {
    if (this.stopped) return false;
    this.queued.push({ id, attempt, queue, output });
    this.flushing ??= this.drain();
    return true;
  }

  /** stop writes what is queued; later completions are the callers'. */
  async stop(): Promise<void> {
    while (this.flushing !== undefined) await this.flushing;
    this.stopped = true;
  }

  private async drain(): Promise<void> {
    // Let the completions of this turn of the event loop join the batch.
    await new Promise<void>((resolve) => setImmediate(resolve));
    while (this.queued.length > 0) {
      await this.flush(this.queued.splice(0, MAX_BATCH));
    }
    this.flushing = undefined;
  }

  /** flush writes a batch: one complete_many per client (per shard in direct mode). */
  private async flush(batch: Completion[]): Promise<void> {
    const parts = new Map<Client, Completion[]>();
    try {
      for (const c of batch) {
        const client = this.clientFor(c.id);
        const part = parts.get(client);
        if (part === undefined) parts.set(client, [c]);
        else part.push(c);
      }
    } catch (err) {
      this.log.error("could not record completions; the reaper will retry the jobs", { jobs: batch.length, err });
      return;
    }
    for (const [client, part] of parts) await this.flushOn(client, part);
  }

  private async flushOn(client: Client, batch: Completion[]): Promise<void> {
    let done: JobId[];
    let calls = 0;
    try {
      done = await this.repeat(() => {
        calls++;
        return client.completeMany(
          batch.map((c) => c.id),
          batch.map((c) => c.attempt),
          batch.some((c) => c.output !== undefined)
            ? batch.map((c) => (c.output === undefined ? undefined : new RawJSON(c.output)))
            : undefined,
        );
      });
    } catch (err) {
      this.log.error("could not record completions; the reaper will retry the jobs", { jobs: batch.length, err });
      return;
    }
    const ok = new Set(done);
    if (calls > 1 && ok.size < batch.length) {
      for (const id of await confirmCompletions(client, this.log, batch.filter((c) => !ok.has(c.id)))) ok.add(id);
    }
    const queues = new Set<string>();
    for (const c of batch) {
      if (ok.has(c.id)) {
        queues.add(c.queue);
      } else {
        this.log.warn("completion refused: the attempt no longer holds the job", { job: c.id, attempt: c.attempt });
      }
    }
    if (queues.size > 0) this.committed(queues);
  }
}

/**
 * confirmCompletions returns those of the refused completions that an
 * earlier, repeated call made: its reply was lost, so the repeat found the
 * job completed already. Without the check such a completion is logged as
 * refused. If the check itself fails, the refusals stand.
 */
export async function confirmCompletions(
  client: Client,
  log: Logger,
  refused: { id: JobId; attempt: number }[],
): Promise<JobId[]> {
  try {
    const mine = await client.completedBy(
      refused.map((c) => c.id),
      refused.map((c) => c.attempt),
    );
    if (mine.length > 0) log.info("completions confirmed: the reply of an earlier call was lost", { jobs: mine.length });
    return mine;
  } catch (err) {
    log.warn("could not check whether refused completions were made by a call whose reply was lost", { jobs: refused.length, err });
    return [];
  }
}
