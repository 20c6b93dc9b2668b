package shardtest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgbackoff/pgbackoff/internal/router"
)

// The Python and TypeScript Workers in direct mode (direct_shards=True,
// directShards: true): given the router's URL, they claim and settle on
// the shards, and follow a queue moved while they run.

// clientsDir is clients/ of the repository.
func clientsDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "clients")
}

// directPythonWorker runs a Python Worker (or AsyncWorker) in direct mode
// over the router at argv[2] for the queues in argv[3] (comma separated);
// each handler prints "ran KEY" (the payload's k). It stops when its
// stdin closes. "hash N QUEUE..." prints each queue's hash shard instead.
const directPythonWorker = `
import asyncio, os, sys, threading, time
sys.path.insert(0, os.environ["PGBACKOFF_SRC"])
import pgbackoff
from pgbackoff.sharding import hash_shard
from psycopg_pool import AsyncConnectionPool, ConnectionPool

mode = sys.argv[1]
if mode == "hash":
    n = int(sys.argv[2])
    for q in sys.argv[3:]:
        print(q, hash_shard(q, n))
    sys.exit(0)
url, queues = sys.argv[2], sys.argv[3].split(",")
out = threading.Lock()

def ran(job):
    with out:
        print("ran", job.payload["k"], flush=True)

if mode == "threads":
    def handler(job, ctx):
        time.sleep(0.002)
        ran(job)
    with ConnectionPool(url, min_size=1, max_size=10, open=True) as pool:
        w = pgbackoff.Worker(pool, [pgbackoff.Queue(q, handler, concurrency=4) for q in queues],
                             direct_shards=True, poll_interval=0.2, reap_interval=1.0)
        threading.Thread(target=lambda: (sys.stdin.read(), w.stop()), daemon=True).start()
        print("started", flush=True)
        w.run()
else:
    async def handler(job, ctx):
        await asyncio.sleep(0.002)
        ran(job)
    async def main():
        async with AsyncConnectionPool(url, min_size=1, max_size=10, open=False) as pool:
            w = pgbackoff.AsyncWorker(pool, [pgbackoff.Queue(q, handler, concurrency=4) for q in queues],
                                      direct_shards=True, poll_interval=0.2, reap_interval=1.0)
            loop = asyncio.get_running_loop()
            threading.Thread(target=lambda: (sys.stdin.read(), loop.call_soon_threadsafe(w.stop)), daemon=True).start()
            print("started", flush=True)
            await w.run()
    asyncio.run(main())
print("stopped", flush=True)
`

// directTypeScriptWorker is directPythonWorker's twin for the TypeScript
// package (its dist/, built by tsc).
const directTypeScriptWorker = `
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";
const dir = process.env.PGBACKOFF_TS;
const pg = createRequire(dir + "/package.json")("pg");
const { Worker, hashShard } = await import(pathToFileURL(dir + "/dist/src/index.js").href);
const [mode, ...args] = process.argv.slice(2);
if (mode === "hash") {
  const n = Number(args[0]);
  for (const q of args.slice(1)) console.log(q, hashShard(q, n));
  process.exit(0);
}
const [url, queues] = args;
const pool = new pg.Pool({ connectionString: url, max: 10 });
pool.on("error", () => {});
const quiet = { debug() {}, info() {}, warn() {}, error: (m, f) => console.error(m, f) };
const worker = new Worker(pool, {
  queues: queues.split(",").map((queue) => ({
    queue, concurrency: 4,
    handler: async (job) => { await new Promise((r) => setTimeout(r, 2)); console.log("ran", job.payload.k); },
  })),
  directShards: true, pollIntervalMs: 200, reapIntervalMs: 1000, logger: quiet,
});
const ac = new AbortController();
process.stdin.on("end", () => ac.abort());
process.stdin.resume();
console.log("started");
await worker.run(ac.signal);
await pool.end();
console.log("stopped");
`

// directKind is how to start one kind of worker script.
type directKind struct {
	name string
	cmd  func(t *testing.T, args ...string) *exec.Cmd
}

func pythonScript(mode string) directKind {
	return directKind{name: "python-" + mode, cmd: func(t *testing.T, args ...string) *exec.Cmd {
		if err := exec.Command("/usr/bin/python3", "-c", "import psycopg, psycopg_pool").Run(); err != nil {
			t.Fatalf("python3 with psycopg and psycopg_pool is needed (python3-psycopg, python3-psycopg-pool): %v", err)
		}
		file := filepath.Join(t.TempDir(), "worker.py")
		require.NoError(t, os.WriteFile(file, []byte(directPythonWorker), 0o644))
		if len(args) > 0 && args[0] == "run" {
			args = append([]string{mode}, args[1:]...)
		}
		cmd := exec.Command("/usr/bin/python3", append([]string{file}, args...)...)
		cmd.Env = append(os.Environ(), "PGBACKOFF_SRC="+filepath.Join(clientsDir(), "python", "src"))
		return cmd
	}}
}

var buildTypeScript sync.Once

func typeScriptScript() directKind {
	return directKind{name: "typescript", cmd: func(t *testing.T, args ...string) *exec.Cmd {
		dir := filepath.Join(clientsDir(), "typescript")
		node, err := exec.LookPath("node")
		require.NoError(t, err, "node is needed for the TypeScript package")
		buildTypeScript.Do(func() {
			if _, err := os.Stat(filepath.Join(dir, "node_modules", ".bin", "tsc")); err != nil {
				npm, err := exec.LookPath("npm")
				require.NoError(t, err, "npm is needed to install the TypeScript package's dependencies")
				cmd := exec.Command(npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
				cmd.Dir = dir
				out, err := cmd.CombinedOutput()
				require.NoError(t, err, "npm ci: %s", out)
			}
			cmd := exec.Command(filepath.Join(dir, "node_modules", ".bin", "tsc"), "-p", ".")
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "tsc: %s", out)
		})
		file := filepath.Join(t.TempDir(), "worker.mjs")
		require.NoError(t, os.WriteFile(file, []byte(directTypeScriptWorker), 0o644))
		if len(args) > 0 && args[0] == "run" {
			args = append([]string{"worker"}, args[1:]...)
		}
		cmd := exec.Command(node, append([]string{file}, args...)...)
		cmd.Env = append(os.Environ(), "PGBACKOFF_TS="+dir)
		return cmd
	}}
}

func directKinds() []directKind {
	return []directKind{pythonScript("threads"), pythonScript("asyncio"), typeScriptScript()}
}

// TestClientHashRuleIsTheRouters: the Python and TypeScript twins of the
// hash rule give the router's backoff._hash_shard for many queue names.
func TestClientHashRuleIsTheRouters(t *testing.T) {
	ctx := context.Background()
	rp := pool(t, env.RouterURL)
	var n int
	require.NoError(t, rp.QueryRow(ctx, `SELECT hash_shards FROM backoff.router_layout`).Scan(&n))
	queues := []string{"", "a", "emails", "déjà-vu", "queue with spaces", strings.Repeat("x", 300)}
	for i := range 200 {
		queues = append(queues, fmt.Sprintf("q-%d-%d", i, rand.IntN(1_000_000)))
	}
	want := map[string]int{}
	for _, q := range queues {
		var k int
		require.NoError(t, rp.QueryRow(ctx, `SELECT backoff._hash_shard($1)`, q).Scan(&k))
		want[q] = k
	}
	for _, kind := range []directKind{pythonScript("threads"), typeScriptScript()} {
		t.Run(kind.name, func(t *testing.T) {
			// One line per queue, in order: the name, a space, its shard.
			got := map[string]int{}
			args := append([]string{"hash", strconv.Itoa(n)}, queues...)
			out, err := kind.cmd(t, args...).Output()
			require.NoError(t, err)
			lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
			require.Len(t, lines, len(queues))
			for i, line := range lines {
				k, err := strconv.Atoi(line[strings.LastIndexByte(line, ' ')+1:])
				require.NoError(t, err, line)
				got[queues[i]] = k
			}
			require.Equal(t, want, got)
		})
	}
}

// routerClaimCalls is how many times the router's backoff.claim ran, from
// its function statistics (track_functions, set for the router database
// by directRouterStats).
func routerClaimCalls(t *testing.T, ctx context.Context) int64 {
	t.Helper()
	conn, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var n int64
	require.NoError(t, conn.QueryRow(ctx, `SELECT coalesce(sum(calls), 0)::bigint FROM pg_stat_user_functions
WHERE schemaname = 'backoff' AND funcname = 'claim'`).Scan(&n))
	return n
}

// directRouterStats turns on function statistics in the router database
// (for new sessions), and checks that a claim through the router counts.
func directRouterStats(t *testing.T, ctx context.Context) {
	t.Helper()
	cfg, err := pgx.ParseConfig(env.RouterURL)
	require.NoError(t, err)
	admin, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	defer admin.Close(ctx)
	db := pgx.Identifier{cfg.Database}.Sanitize()
	_, err = admin.Exec(ctx, `ALTER DATABASE `+db+` SET track_functions = 'all'`)
	require.NoError(t, err)
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), env.RouterURL)
		if err == nil {
			_, _ = c.Exec(context.Background(), `ALTER DATABASE `+db+` RESET track_functions`)
			c.Close(context.Background())
		}
	})
	before := routerClaimCalls(t, ctx)
	probe, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	_, err = probe.Exec(ctx, `SELECT count(*) FROM backoff.claim($1, 'stats-probe', 1)`, fmt.Sprintf("probe-%d", rand.IntN(1_000_000)))
	require.NoError(t, err)
	probe.Close(ctx)
	require.Eventually(t, func() bool { return routerClaimCalls(t, ctx) > before }, time.Minute, 50*time.Millisecond,
		"a claim through the router shows in its function statistics")
}

// TestWorkersDirectToShards runs the Python Worker, the Python AsyncWorker
// and the TypeScript Worker in direct mode over the router: jobs of queues
// on every shard complete exactly once; the router runs none of their
// claims, which the shards serve (their connections are on every shard);
// a queue moved to another shard while the worker runs is followed, and
// its jobs, moved or enqueued after the move, complete exactly once.
func TestWorkersDirectToShards(t *testing.T) {
	for _, kind := range directKinds() {
		t.Run(kind.name, func(t *testing.T) { testWorkerDirectToShards(t, kind) })
	}
}

func testWorkerDirectToShards(t *testing.T, kind directKind) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rp := pool(t, env.RouterURL)
	directRouterStats(t, ctx)

	prefix := fmt.Sprintf("direct-%s-%d", kind.name, rand.IntN(1_000_000))
	queues := queuesOnEveryShard(t, prefix)
	moving, from := moveQueueName(t, prefix+"-mv")
	to := (from + 1) % NShards
	all := append(append([]string{}, queues...), moving)

	var keys []string
	enqueueAt := func(q, key string, in time.Duration) {
		t.Helper()
		_, err := rp.Exec(ctx, `SELECT backoff.enqueue($1, jsonb_build_object('k', $2::text), p_run_at => now() + $3::interval)`,
			q, key, fmt.Sprintf("%d milliseconds", in.Milliseconds()))
		require.NoError(t, err)
		keys = append(keys, key)
	}
	enqueue := func(q, key string) { t.Helper(); enqueueAt(q, key, 0) }
	for _, q := range all {
		for i := range 30 {
			enqueue(q, fmt.Sprintf("%s/%d", q, i))
		}
	}
	claims := routerClaimCalls(t, ctx)

	app := fmt.Sprintf("pgbackoff-direct-%d", rand.IntN(1_000_000))
	u, err := url.Parse(env.RouterURL)
	require.NoError(t, err)
	q := u.Query()
	q.Set("application_name", app)
	u.RawQuery = q.Encode()

	cmd := kind.cmd(t, "run", u.String(), strings.Join(all, ","))
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	var (
		mu   sync.Mutex
		ran  = map[string]int{}
		text []string
	)
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			line := s.Text()
			mu.Lock()
			if k, ok := strings.CutPrefix(line, "ran "); ok {
				ran[k]++
			} else {
				text = append(text, line)
			}
			mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
	}()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		stdin.Close()
		select {
		case err := <-exited:
			require.NoError(t, err, "the worker's stderr:\n%s", stderr.String())
		case <-time.After(2 * time.Minute):
			_ = cmd.Process.Kill()
			t.Fatalf("the worker did not stop; stderr:\n%s", stderr.String())
		}
	}
	defer func() {
		if !stopped {
			stdin.Close()
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	allRan := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			if ran[k] == 0 {
				return false
			}
		}
		return true
	}
	diag := func() string {
		mu.Lock()
		defer mu.Unlock()
		return fmt.Sprintf("%d of %d keys ran; output %q; stderr:\n%s", len(ran), len(keys), text, stderr.String())
	}

	// Its connections are on every shard: each shard holds a served queue.
	onShard := make([]bool, NShards)
	pollUntil(t, func() bool {
		for k := range NShards {
			if onShard[k] {
				continue
			}
			var n int
			require.NoError(t, shardQueryRow(ctx, k, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n))
			onShard[k] = n > 0
		}
		for _, ok := range onShard {
			if !ok {
				return false
			}
		}
		return true
	}, 2*time.Minute, func() string { return fmt.Sprintf("the worker's connections on every shard: %v; %s", onShard, diag()) })
	pollUntil(t, allRan, 2*time.Minute, func() string { return "the first jobs ran: " + diag() })

	// Move a queue that has waiting jobs while the worker runs: due in a
	// few seconds, so that the move (which stops the old shard's claims
	// first) copies them, and the worker claims them on the new shard.
	for i := range 300 {
		enqueueAt(moving, fmt.Sprintf("%s/moved-%d", moving, i), 5*time.Second)
	}
	mover, err := pgx.Connect(ctx, env.RouterURL)
	require.NoError(t, err)
	base, err := pgx.ParseConfig(env.RouterURL)
	require.NoError(t, err)
	res, err := router.MoveQueue(ctx, mover, base, moving, to, router.MoveOptions{Batch: 50})
	mover.Close(ctx)
	require.NoError(t, err)
	require.Equal(t, to, res.To)
	movedAt := time.Now()
	for i := range 30 {
		enqueue(moving, fmt.Sprintf("%s/after-%d", moving, i))
	}
	pollUntil(t, allRan, 2*time.Minute, func() string { return "every job ran after the move: " + diag() })
	t.Logf("%s: the moved queue's jobs enqueued after the move ran within %s", kind.name, time.Since(movedAt).Round(time.Millisecond))

	// Every job completed exactly once, on the shard it was on.
	require.Eventually(t, func() bool {
		var left int
		require.NoError(t, rp.QueryRow(ctx, `SELECT count(*) FROM backoff.jobs WHERE queue = ANY($1) AND status <> 'completed'`, all).Scan(&left))
		return left == 0
	}, time.Minute, 50*time.Millisecond, "every job completed")
	stop()
	mu.Lock()
	for _, k := range keys {
		require.Equal(t, 1, ran[k], "handler runs of %s", k)
	}
	require.Len(t, ran, len(keys))
	require.Contains(t, text, "stopped")
	mu.Unlock()
	rows, err := rp.Query(ctx, `SELECT payload->>'k', count(*) FROM backoff.jobs WHERE queue = ANY($1) GROUP BY 1`, all)
	require.NoError(t, err)
	completed := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		require.NoError(t, rows.Scan(&k, &n))
		completed[k] = n
	}
	require.NoError(t, rows.Err())
	require.Len(t, completed, len(keys))
	for _, k := range keys {
		require.Equal(t, 1, completed[k], "jobs of %s", k)
	}
	var moved int
	require.NoError(t, shardQueryRow(ctx, to, `SELECT count(*) FROM backoff.moved_jobs WHERE queue = $1`, moving).Scan(&moved))
	require.Equal(t, 300, moved, "the move copied the waiting jobs")

	// None of its claims went through the router: once its sessions there
	// have ended (and reported their statistics), the router's count of
	// backoff.claim calls is what it was before it started.
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, rp.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, app).Scan(&n))
		return n == 0
	}, time.Minute, 50*time.Millisecond, "the worker's sessions on the router ended")
	require.Equal(t, claims, routerClaimCalls(t, ctx), "claims through the router")
}

// pollUntil polls cond until it holds, and fails with what() after d.
func pollUntil(t *testing.T, cond func() bool, d time.Duration, what func() string) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// shardQueryRow runs one query on shard k directly.
func shardQueryRow(ctx context.Context, k int, sql string, args ...any) pgx.Row {
	conn, err := pgx.Connect(ctx, env.ShardURLs[k])
	if err != nil {
		return errRow{err}
	}
	return closingRow{conn.QueryRow(ctx, sql, args...), conn, ctx}
}

type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

type closingRow struct {
	row  pgx.Row
	conn *pgx.Conn
	ctx  context.Context
}

func (r closingRow) Scan(dest ...any) error {
	defer r.conn.Close(r.ctx)
	return r.row.Scan(dest...)
}
