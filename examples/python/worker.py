#!/usr/bin/env python3
"""A pgbackoff worker in Python, on the pgbackoff package (clients/python).

    python3 examples/python/worker.py "$DATABASE_URL"

Enqueues 20 jobs into the queue "python-demo": job 7 is a poison message
(its handler raises Permanent, so it is dead-lettered at once), every fifth
job fails once with a transient error and is retried at once (RetryAfter
0, for the demo's sake; a plain exception would wait for the policy's
delay). The Worker claims, runs four handlers at a time, heartbeats and
settles each job with the attempt it was claimed with; the script stops it
when nothing is left to run. Exits non-zero when the final state is not
the expected one.
"""
import pathlib
import sys
import threading
import time

# Use the package from the repository when it is not installed.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "clients" / "python" / "src"))

from psycopg_pool import ConnectionPool  # noqa: E402

import pgbackoff  # noqa: E402

QUEUE = "python-demo"


def handle(job: pgbackoff.Job, ctx: pgbackoff.Context) -> None:
    n = job.payload["n"]
    if n == 7:
        print(f"job {job.id} attempt {job.attempt}: dead-lettered: payload {n} is malformed")
        raise pgbackoff.Permanent(f"payload {n} is malformed")
    if n % 5 == 0 and job.counted_attempt == 1:
        print(f"job {job.id} attempt {job.attempt}: failed, will retry: connection reset by downstream")
        raise pgbackoff.RetryAfter("connection reset by downstream", 0)


def main(url: str) -> int:
    with ConnectionPool(url, min_size=1, max_size=6, kwargs={"autocommit": True}) as pool:
        client = pgbackoff.Client(pool)
        client.enqueue_many([pgbackoff.NewJob(QUEUE, {"n": n}) for n in range(1, 21)])
        print("enqueued 20 jobs")

        worker = pgbackoff.Worker(pool, [pgbackoff.Queue(QUEUE, handle, concurrency=4)], poll_interval=0.1)
        running = threading.Thread(target=worker.run)
        running.start()
        while True:
            (stats,) = [s for s in client.stats() if s.queue == QUEUE]
            if stats.pending + stats.running + stats.retrying == 0:
                break
            time.sleep(0.05)
        worker.stop()
        running.join()

        print(f"completed={stats.completed} dead_lettered={stats.dead_lettered} retried={stats.retries}")
        if (stats.completed, stats.dead_lettered, stats.retries) != (19, 1, 4):
            print(f"unexpected final state: {stats}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: worker.py DATABASE_URL", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
