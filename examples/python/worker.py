#!/usr/bin/env python3
"""A pgbackoff worker in Python, with psycopg 3 and the SQL functions alone.

    python3 examples/python/worker.py "$DATABASE_URL"

Enqueues 20 jobs into the queue "python-demo": job 7 is a poison message
(its handler raises a non-retryable error, so it is dead-lettered at once),
every fifth job fails once with a transient error and is retried. The worker
claims in batches of 5, settles each job with the attempt it was claimed
with, and stops when nothing is left to claim. Exits non-zero when the final
state is not the expected one.
"""
import sys

import psycopg

QUEUE = "python-demo"


class PermanentError(Exception):
    """An error that retrying cannot fix: the job is dead-lettered."""


def handle(job_id, attempt, payload):
    n = payload["n"]
    if n == 7:
        raise PermanentError(f"payload {n} is malformed")
    if n % 5 == 0 and attempt == 1:
        raise RuntimeError("connection reset by downstream")


def main(url):
    with psycopg.connect(url, autocommit=True) as conn:
        for n in range(1, 21):
            conn.execute("SELECT backoff.enqueue(%s, %s::jsonb)", (QUEUE, f'{{"n": {n}}}'))
        print("enqueued 20 jobs")

        while True:
            jobs = conn.execute(
                "SELECT id, attempts, payload FROM backoff.claim(%s, %s, 5, interval '30 seconds')",
                (QUEUE, "python-worker"),
            ).fetchall()
            if not jobs:
                break
            for job_id, attempt, payload in jobs:
                try:
                    handle(job_id, attempt, payload)
                except PermanentError as e:
                    conn.execute(
                        "SELECT backoff.fail(%s, %s, %s, p_retryable => false)", (job_id, attempt, str(e))
                    )
                    print(f"job {job_id} attempt {attempt}: dead-lettered: {e}")
                except Exception as e:  # transient: retry now, for the demo's sake
                    conn.execute(
                        "SELECT backoff.fail(%s, %s, %s, p_retry_in => interval '0')", (job_id, attempt, str(e))
                    )
                    print(f"job {job_id} attempt {attempt}: failed, will retry: {e}")
                else:
                    conn.execute("SELECT backoff.complete(%s, %s)", (job_id, attempt))

        counts = dict(
            conn.execute(
                "SELECT status, count(*) FROM backoff.jobs WHERE queue = %s GROUP BY status", (QUEUE,)
            ).fetchall()
        )
        retried = conn.execute(
            "SELECT count(*) FROM backoff.jobs WHERE queue = %s AND attempts = 2", (QUEUE,)
        ).fetchone()[0]
        print(f"completed={counts.get('completed', 0)} dead_lettered={counts.get('dead_lettered', 0)} retried={retried}")
        if counts != {"completed": 19, "dead_lettered": 1} or retried != 4:
            print(f"unexpected final state: {counts}, retried={retried}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: worker.py DATABASE_URL", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
