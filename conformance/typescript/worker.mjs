// The TypeScript adapter of the conformance suite (conformance/README.md):
// a pgbackoff Worker on one queue whose handler does what each job's
// payload says. Runs until SIGTERM or SIGINT, shuts down as the Worker does
// and exits 0.
//
//   PGBACKOFF_TS_DIST=<tsc output> node conformance/typescript/worker.mjs DATABASE_URL SETTINGS_JSON
//
// PGBACKOFF_TS_DIST is the package compiled by tsc (the directory holding
// src/index.js); the default is clients/typescript/dist.
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const dist = process.env.PGBACKOFF_TS_DIST ?? path.join(here, "..", "..", "clients", "typescript", "dist");
const { Client, Worker, PermanentError, RetryAfterError, SnoozeError } = await import(
  pathToFileURL(path.join(dist, "src", "index.js")).href
);
const { default: pg } = await import(pathToFileURL(path.join(dist, "..", "node_modules", "pg", "lib", "index.js")).href);

if (process.argv.length !== 4) {
  console.error("usage: worker.mjs DATABASE_URL SETTINGS_JSON");
  process.exit(2);
}
const url = process.argv[2];
const s = JSON.parse(process.argv[3]);
const language = s.language ?? "typescript";
const concurrency = s.concurrency || 10;
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// "queues", when set, are served beside "queue" by the same Worker.
const names = [s.queue, ...(s.queues ?? [])];
const pool = new pg.Pool({ connectionString: url, max: 4 + names.length + concurrency });
const client = await Client.connect(pool);

async function handle(job, signal, ctx) {
  const steps = job.payload?.steps;
  if (!Array.isArray(steps) || steps.length === 0) {
    throw new PermanentError(`conformance: bad payload ${JSON.stringify(job.payload)}`);
  }
  const step = steps[Math.min(job.attempt, steps.length) - 1];
  if (step === "noop") return; // the benchmarks' handler: no side effect to record
  await pool.query("INSERT INTO conformance_effects (job_id, attempt, language, step) VALUES ($1, $2, $3, $4)", [
    job.id,
    job.attempt,
    language,
    step,
  ]);
  const [kind, arg] = step.split(":");
  const n = arg === undefined ? 0 : Number(arg);
  const msg = `conformance: ${kind} at attempt ${job.attempt}`;
  switch (kind) {
    case "ok":
      return;
    case "output":
      ctx.setOutput({ name: job.payload.name });
      return;
    case "big_output":
      ctx.setOutput({ name: job.payload.name, pad: "x".repeat(300) });
      return;
    case "fan_in": {
      const parents = await client.parentOutputs(job.id);
      ctx.setOutput({ parents: parents.map((p) => ({ status: p.status, output: p.output ?? null })) });
      return;
    }
    case "fail":
      throw new Error(msg);
    case "permanent":
      throw new PermanentError(msg);
    case "retry_after":
      throw new RetryAfterError(n, msg);
    case "snooze":
      throw new SnoozeError(n);
    case "throw":
      throw msg; // not an Error: what careless JavaScript throws
    case "hang":
      await sleep(n); // ignores the signal on purpose: the scenario is a handler that does
      return;
    case "wait_cancel": {
      const cancelled = await new Promise((resolve) => {
        if (signal.aborted) return resolve(true);
        const t = setTimeout(() => resolve(false), 10000);
        signal.addEventListener("abort", () => {
          clearTimeout(t);
          resolve(true);
        });
      });
      // Not the reason's text: the worker must say "worker shutdown" itself.
      throw new Error(cancelled ? `${msg}: cancelled` : `${msg}: never cancelled`);
    }
  }
  throw new PermanentError(`conformance: unknown step ${step}`);
}

// directShards is the one place where BACKOFF_DIRECT_SHARDS=1 (the sharded
// conformance run) gives the Worker the direct shard mode, where it reads
// the router's layout and calls each queue's shard itself.
function directShards(cfg) {
  const value = process.env.BACKOFF_DIRECT_SHARDS ?? "";
  if (value === "" || value === "0") return;
  if (value === "1") {
    cfg.directShards = true;
    return;
  }
  console.error(`worker.mjs: BACKOFF_DIRECT_SHARDS=${JSON.stringify(value)}: want 1 or 0`);
  process.exit(2);
}

const queueCfg = (queue) => {
  const cfg = { queue, handler: handle, concurrency };
  if (s.lease_ms) cfg.leaseMs = s.lease_ms;
  if (s.heartbeat_ms) cfg.heartbeatIntervalMs = s.heartbeat_ms;
  return cfg;
};
const wcfg = { queues: names.map(queueCfg) };
if (s.poll_ms) wcfg.pollIntervalMs = s.poll_ms;
if (s.reap_ms) wcfg.reapIntervalMs = s.reap_ms;
if (s.shutdown_ms) wcfg.shutdownTimeoutMs = s.shutdown_ms;

directShards(wcfg);
const worker = new Worker(pool, wcfg);
const stop = new AbortController();
process.on("SIGTERM", () => stop.abort());
process.on("SIGINT", () => stop.abort());
await worker.run(stop.signal);
await pool.end();
