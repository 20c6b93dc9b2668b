#!/usr/bin/env python3
"""The Python adapter of the conformance suite (conformance/README.md): a
pgbackoff.Worker on one queue whose handler does what each job's payload
says. Runs until SIGTERM or SIGINT, shuts down as the Worker does and exits 0.

    python3 conformance/python/worker.py DATABASE_URL SETTINGS_JSON
"""
from __future__ import annotations

import json
import os
import pathlib
import signal
import sys
import time
from typing import Any

# The package from this checkout.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "clients" / "python" / "src"))

from psycopg_pool import ConnectionPool  # noqa: E402

import pgbackoff  # noqa: E402


def seconds(ms: int | None) -> float | None:
    """Milliseconds of the settings as seconds; 0 or absent: the default."""
    return None if not ms else ms / 1000


class Handler:
    def __init__(self, pool: ConnectionPool, language: str) -> None:
        self.pool = pool
        self.client = pgbackoff.Client(pool)
        self.language = language

    def __call__(self, job: pgbackoff.Job, ctx: pgbackoff.Context) -> None:
        steps = job.payload.get("steps") if isinstance(job.payload, dict) else None
        if not steps:
            raise pgbackoff.Permanent(f"conformance: bad payload {job.payload!r}")
        step: str = steps[min(job.attempt, len(steps)) - 1]
        if step == "noop":
            return  # the benchmarks' handler: no side effect to record
        with self.pool.connection() as conn:
            conn.execute(
                "INSERT INTO conformance_effects (job_id, attempt, language, step) VALUES (%s, %s, %s, %s)",
                (job.id, job.attempt, self.language, step),
            )
        kind, _, arg = step.partition(":")
        n = int(arg) if arg else 0
        msg = f"conformance: {kind} at attempt {job.attempt}"
        if kind == "ok":
            return
        if kind == "output":
            ctx.set_output({"name": job.payload.get("name")})
            return
        if kind == "big_output":
            ctx.set_output({"name": job.payload.get("name"), "pad": "x" * 300})
            return
        if kind == "fan_in":
            parents = self.client.parent_outputs(job.id)
            ctx.set_output({"parents": [{"status": p.status, "output": p.output} for p in parents]})
            return
        if kind == "fail":
            raise RuntimeError(msg)
        if kind == "permanent":
            raise pgbackoff.Permanent(msg)
        if kind == "retry_after":
            raise pgbackoff.RetryAfter(msg, n / 1000)
        if kind == "snooze":
            raise pgbackoff.Snooze(n / 1000)
        if kind == "throw":
            raise KeyError(msg)  # not an exception a handler would mean to raise
        if kind == "hang":
            time.sleep(n / 1000)  # ignores ctx on purpose: the scenario is a handler that does
            return
        if kind == "wait_cancel":
            if ctx.wait(10):
                # Not the cause's text: the worker must say "worker shutdown" itself.
                raise RuntimeError(f"{msg}: cancelled")
            raise RuntimeError(f"{msg}: never cancelled")
        raise pgbackoff.Permanent(f"conformance: unknown step {step!r}")


def direct_shards(kwargs: dict[str, Any]) -> None:
    """The one place where BACKOFF_DIRECT_SHARDS=1 (the sharded conformance
    run) gives the Worker the direct shard mode, where it reads the router's
    layout and calls each queue's shard itself."""
    value = os.environ.get("BACKOFF_DIRECT_SHARDS", "")
    if value in ("", "0"):
        return
    if value == "1":
        kwargs["direct_shards"] = True
        return
    raise SystemExit(f"worker.py: BACKOFF_DIRECT_SHARDS={value!r}: want 1 or 0")


def main(url: str, settings: dict[str, Any]) -> int:
    concurrency = settings.get("concurrency") or 10
    # "queues", when set, are served beside "queue" by the same Worker.
    names = [settings["queue"], *settings.get("queues", [])]
    # Worker needs: one claim per queue, the completer, the heartbeater,
    # the reaper, LISTEN; the handlers' own inserts take one each.
    with ConnectionPool(url, min_size=1, max_size=4 + len(names) + concurrency, kwargs={"autocommit": True}) as pool:
        handler = Handler(pool, settings.get("language", "python"))
        queues = [
            pgbackoff.Queue(
                name,
                handler,
                concurrency=concurrency,
                lease=seconds(settings.get("lease_ms")),
                heartbeat_interval=seconds(settings.get("heartbeat_ms")),
            )
            for name in names
        ]
        kwargs: dict[str, Any] = {}
        if settings.get("poll_ms"):
            kwargs["poll_interval"] = settings["poll_ms"] / 1000
        if settings.get("reap_ms"):
            kwargs["reap_interval"] = settings["reap_ms"] / 1000
        if settings.get("shutdown_ms"):
            kwargs["shutdown_timeout"] = settings["shutdown_ms"] / 1000
        direct_shards(kwargs)
        worker = pgbackoff.Worker(pool, queues, **kwargs)

        def stop(signum: int, frame: object) -> None:
            worker.stop()

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        worker.run()
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print("usage: worker.py DATABASE_URL SETTINGS_JSON", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1], json.loads(sys.argv[2])))
