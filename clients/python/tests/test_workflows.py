"""Workflows (docs/workflows.md) from Python against a real PostgreSQL: a
graph enqueued in one call, outputs, parents' outputs under each edge
policy, progress with the heartbeat, and the Workers' set_output and
report_progress."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
import pytest
from conftest import FakeClock, eventually, job_row
from psycopg_pool import AsyncConnectionPool, ConnectionPool
from test_worker import running

import pgbackoff
from pgbackoff import AsyncClient, AsyncWorker, Client, Context, Graph, Job, Queue, Worker, after, after_job


def claim_one(client: Client, queue: str) -> Job:
    jobs = client.claim(queue, lease=300)
    assert len(jobs) == 1, jobs
    return jobs[0]


def test_graph_outputs_and_parents(client: Client, conn: psycopg.Connection[Any]) -> None:
    """A fan-out/fan-in graph: the children are blocked until their parent
    completes, in the completing call; the fan-in job reads each parent's
    output with its status and edge policy."""
    ids = client.enqueue_graph(
        Graph()
        .add("extract", "wf-etl", {"table": "orders"})
        .add("load-eu", "wf-etl", {"region": "eu"}, depends_on=["extract"])
        .add("load-us", "wf-etl", {"region": "us"}, depends_on=["extract"])
        .add("report", "wf-reports", depends_on=["load-eu", after("load-us", on_failure="run")])
    )
    assert set(ids) == {"extract", "load-eu", "load-us", "report"}
    assert job_row(conn, ids["load-eu"])["status"] == "blocked"
    assert job_row(conn, ids["report"])["status"] == "blocked"

    extract = claim_one(client, "wf-etl")
    assert extract.id == ids["extract"]
    assert client.complete_with_output(extract.id, extract.attempt, {"rows": 42}).status == "completed"
    assert client.job_output(extract.id) == {"rows": 42}
    assert job_row(conn, ids["load-eu"])["status"] == "pending"

    loads = client.claim("wf-etl", 2, lease=300)
    assert sorted(j.id for j in loads) == sorted([ids["load-eu"], ids["load-us"]])
    eu = next(j for j in loads if j.id == ids["load-eu"])
    us = next(j for j in loads if j.id == ids["load-us"])
    assert [p.output for p in client.parent_outputs(eu.id)] == [{"rows": 42}]
    assert client.complete_many([eu.id], [eu.attempt], [{"region": "eu", "rows": 20}]) == [eu.id]
    client.fail(us.id, us.attempt, "region offline", retryable=False)

    assert job_row(conn, ids["report"])["status"] == "pending", "load-us's edge says run"
    parents = client.parent_outputs(ids["report"])
    assert [(p.parent_id, p.queue, p.status, p.on_failure, p.output) for p in parents] == [
        (ids["load-eu"], "wf-etl", "completed", "cancel", {"region": "eu", "rows": 20}),
        (ids["load-us"], "wf-etl", "dead_lettered", "run", None),
    ]
    assert client.job_output(ids["load-us"]) is None
    assert client.parent_outputs(ids["extract"]) == []


def test_graph_as_plain_data_and_existing_jobs(client: Client, conn: psycopg.Connection[Any]) -> None:
    """The documents backoff.enqueue_graph takes work as they are, with
    dependencies on existing jobs; a graph that names an unknown ref is
    refused, naming it, and enqueues nothing."""
    first = client.enqueue("wf-plain", {"n": 0})
    ids = client.enqueue_graph(
        [
            {"ref": "a", "queue": "wf-plain", "payload": {"n": 1}, "depends_on": [first]},
            {"ref": "b", "queue": "wf-plain", "depends_on": ["a", {"job": first, "on_failure": "wait"}]},
        ]
    )
    assert job_row(conn, ids["a"])["status"] == "blocked"
    ids2 = client.enqueue_graph(Graph().add("c", "wf-plain", depends_on=[after_job(ids["b"], "run")], priority=3))
    assert job_row(conn, ids2["c"])["status"] == "blocked"
    with pytest.raises(pgbackoff.InvalidArgument, match="nope"):
        client.enqueue_graph(Graph().add("x", "wf-plain").add("y", "wf-plain", depends_on=["nope"]))
    with pytest.raises(pgbackoff.InvalidArgument):
        client.enqueue_graph(Graph().add("x", "wf-plain", depends_on=["y"]).add("y", "wf-plain", depends_on=["x"]))
    assert conn.execute("SELECT count(*) FROM backoff.jobs WHERE queue = 'wf-plain'").fetchone() == (4,)


@pytest.mark.parametrize("policy", ["cancel", "run", "wait"])
def test_a_failed_parent_under_each_policy(client: Client, conn: psycopg.Connection[Any], policy: str) -> None:
    """cancel cancels the child naming the parent; run releases it; wait
    keeps it blocked until unblock."""
    queue = f"wf-policy-{policy}"
    ids = client.enqueue_graph(Graph().add("parent", queue).add("child", queue, depends_on=[after("parent", on_failure=policy)]))  # type: ignore[arg-type]
    parent = claim_one(client, queue)
    client.fail(parent.id, parent.attempt, "broken", retryable=False)
    child = job_row(conn, ids["child"])
    if policy == "cancel":
        assert child["status"] == "cancelled"
        assert str(ids["parent"]) in child["last_error"]
    elif policy == "run":
        assert child["status"] == "pending"
    else:
        assert child["status"] == "blocked"
        conn.execute("SELECT backoff.unblock(%s)", (ids["child"],))
        assert job_row(conn, ids["child"])["status"] == "pending"
    [p] = client.parent_outputs(ids["child"])
    assert (p.status, p.on_failure, p.output) == ("dead_lettered", policy, None)


def test_output_limit_and_progress(client: Client, conn: psycopg.Connection[Any]) -> None:
    """An output over the limit is refused and the job stays running; a
    heartbeat records progress; a value without a JSON form is refused
    before any call."""
    conn.execute("UPDATE backoff.settings SET max_output_bytes = 1024")
    client.enqueue("wf-limit")
    job = claim_one(client, "wf-limit")
    with pytest.raises(pgbackoff.InvalidArgument):
        client.complete_with_output(job.id, job.attempt, {"blob": "x" * 5000})
    assert job_row(conn, job.id)["status"] == "running"
    with pytest.raises(pgbackoff.InvalidArgument):
        client.complete_with_output(job.id, job.attempt, {"when": object()})
    client.heartbeat_progress(job.id, job.attempt, {"done": 40, "of": 100})
    assert conn.execute("SELECT progress FROM backoff.job_progress WHERE job_id = %s", (job.id,)).fetchone() == ({"done": 40, "of": 100},)
    client.complete_with_output(job.id, job.attempt, pgbackoff.RawJSON('{"raw": true}'))
    assert client.job_output(job.id) == {"raw": True}


def test_worker_records_outputs_and_progress(pool: ConnectionPool, client: Client, conn: psycopg.Connection[Any]) -> None:
    """The Worker completes a job with what its handler set: a small output
    in the batched complete_many, a larger one in a call of its own, one
    over the limit dead-letters the job naming the refusal; a reported
    progress goes with the next heartbeat."""
    conn.execute("UPDATE backoff.settings SET max_output_bytes = 1024")
    seen_progress = threading.Event()

    def handle(job: Job, ctx: Context) -> None:
        kind = job.payload["kind"]
        if kind == "small":
            ctx.set_output({"n": job.payload["n"]})
        elif kind == "large":
            ctx.set_output({"blob": "y" * 500})
        elif kind == "over":
            ctx.set_output({"blob": "z" * 5000})
        elif kind == "progress":
            ctx.report_progress({"done": 1})
            assert seen_progress.wait(60), "progress never reached the database"
            ctx.set_output([parent.output for parent in client.parent_outputs(job.id)])

    ids = client.enqueue_graph(
        Graph()
        .add("s1", "wf-worker", {"kind": "small", "n": 1})
        .add("s2", "wf-worker", {"kind": "small", "n": 2})
        .add("large", "wf-worker", {"kind": "large"})
        .add("over", "wf-worker", {"kind": "over"})
        .add("fan-in", "wf-worker", {"kind": "progress"}, depends_on=["s1", "s2"])
    )
    worker = Worker(pool, [Queue("wf-worker", handle, concurrency=4, lease=300, heartbeat_interval=0.05)], poll_interval=0.05, now=client.now)
    with running(worker):
        eventually(
            lambda: conn.execute("SELECT count(*) FROM backoff.job_progress WHERE job_id = %s", (ids["fan-in"],)).fetchone() == (1,),
            timeout=30,
            what="progress",
        )
        seen_progress.set()
        eventually(lambda: job_row(conn, ids["fan-in"])["status"] == "completed", timeout=30, what="the fan-in job")
        eventually(lambda: job_row(conn, ids["over"])["status"] == "dead_lettered", timeout=30, what="the over-limit job")

    assert client.job_output(ids["s1"]) == {"n": 1}
    assert client.job_output(ids["large"]) == {"blob": "y" * 500}
    assert client.job_output(ids["fan-in"]) == [{"n": 1}, {"n": 2}]
    over = job_row(conn, ids["over"])
    assert over["dead_letter_reason"] == "non_retryable"
    assert over["last_error"].startswith("output refused: ")
    assert client.job_output(ids["over"]) is None


def test_async_worker_records_outputs(db_url: str, clock: FakeClock, conn: psycopg.Connection[Any]) -> None:
    """The AsyncWorker, as the Worker: outputs batched or alone, the
    refused one dead-letters, progress with the heartbeat; the AsyncClient's
    workflow calls."""
    conn.execute("UPDATE backoff.settings SET max_output_bytes = 1024")

    async def main() -> None:
        async with AsyncConnectionPool(db_url, min_size=1, max_size=10, kwargs={"autocommit": True}) as pool:
            client = AsyncClient(pool, now=clock)
            seen_progress = asyncio.Event()

            async def handle(job: Job, ctx: Context) -> None:
                kind = job.payload["kind"]
                if kind == "small":
                    ctx.set_output({"n": job.payload["n"]})
                elif kind == "large":
                    ctx.set_output({"blob": "y" * 500})
                elif kind == "over":
                    ctx.set_output({"blob": "z" * 5000})
                else:
                    ctx.report_progress({"done": 1})
                    await asyncio.wait_for(seen_progress.wait(), 60)
                    ctx.set_output([p.output for p in await client.parent_outputs(job.id)])

            ids = await client.enqueue_graph(
                Graph()
                .add("s1", "wf-async", {"kind": "small", "n": 1})
                .add("large", "wf-async", {"kind": "large"})
                .add("over", "wf-async", {"kind": "over"})
                .add("fan-in", "wf-async", {"kind": "progress"}, depends_on=["s1", "large"])
            )
            worker = AsyncWorker(pool, [Queue("wf-async", handle, concurrency=4, lease=300, heartbeat_interval=0.05)], poll_interval=0.05, now=clock)
            task = asyncio.create_task(worker.run())

            async def status(ref: str) -> str:
                return str(job_row(conn, ids[ref])["status"])

            async def wait(check: Any, what: str) -> None:
                deadline = asyncio.get_running_loop().time() + 30
                while not await check():
                    assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
                    await asyncio.sleep(0.01)

            async def has_progress() -> bool:
                return conn.execute("SELECT count(*) FROM backoff.job_progress WHERE job_id = %s", (ids["fan-in"],)).fetchone() == (1,)

            async def fan_in_done() -> bool:
                return await status("fan-in") == "completed"

            async def over_done() -> bool:
                return await status("over") == "dead_lettered"

            try:
                await wait(has_progress, "progress")
                seen_progress.set()
                await wait(fan_in_done, "the fan-in job")
                await wait(over_done, "the over-limit job")
            finally:
                worker.stop()
                await task
            assert await client.job_output(ids["fan-in"]) == [{"n": 1}, {"blob": "y" * 500}]
            assert job_row(conn, ids["over"])["last_error"].startswith("output refused: ")

    asyncio.run(main())


def _registered(conn: psycopg.Connection[Any], job_id: int) -> bool:
    return conn.execute("SELECT count(*) FROM backoff.job_awaiters WHERE job_id = %s", (job_id,)).fetchone() == (1,)


def test_wait_for_output(client: Client, db_url: str, conn: psycopg.Connection[Any]) -> None:
    """wait_for_output over a pool returns when the finishing call
    notifies (a poll of an hour could not end the wait in time); on a
    connection it polls; a finished job comes back at once, a missing one
    is JobNotFound, and a wait that times out leaves no registration."""
    job_id = client.enqueue("wf-await", max_attempts=1)
    got: list[pgbackoff.FinishedJob] = []
    waiter = threading.Thread(target=lambda: got.append(client.wait_for_output(job_id, timeout=120, poll_interval=3600)))
    waiter.start()
    eventually(lambda: _registered(conn, job_id), what="the registration")
    job = claim_one(client, "wf-await")
    client.complete_with_output(job.id, job.attempt, {"rows": 42})
    waiter.join(60)
    assert not waiter.is_alive(), "wait_for_output did not return when the job finished"
    assert got == [pgbackoff.FinishedJob(job_id, "completed", {"rows": 42})]
    assert conn.execute("SELECT count(*) FROM backoff.job_awaiters").fetchone() == (0,)

    assert client.wait_for_output(job_id) == pgbackoff.FinishedJob(job_id, "completed", {"rows": 42})
    with pytest.raises(pgbackoff.JobNotFound):
        client.wait_for_output(job_id + 1000)

    never = client.enqueue("wf-await-never")
    with pytest.raises(TimeoutError):
        client.wait_for_output(never, timeout=0.3, poll_interval=3600)
    assert conn.execute("SELECT count(*) FROM backoff.job_awaiters").fetchone() == (0,)

    with psycopg.connect(db_url, autocommit=True) as own:
        on_conn = client.using(own)
        polled = client.enqueue("wf-await-poll")
        got.clear()
        waiter = threading.Thread(target=lambda: got.append(on_conn.wait_for_output(polled, timeout=120, poll_interval=0.02)))
        waiter.start()
        eventually(lambda: _registered(conn, polled), what="the registration")
        job = claim_one(client, "wf-await-poll")
        client.fail(job.id, job.attempt, "broken", retryable=False)
        waiter.join(60)
        assert got == [pgbackoff.FinishedJob(polled, "dead_lettered", None)]


def test_async_wait_for_output(db_url: str, clock: FakeClock, conn: psycopg.Connection[Any]) -> None:
    """AsyncClient.wait_for_output: woken by the notification of a cancel."""

    async def main() -> None:
        async with AsyncConnectionPool(db_url, min_size=1, max_size=4, kwargs={"autocommit": True}) as pool:
            client = AsyncClient(pool, now=clock)
            job_id = await client.enqueue("wf-async-await")
            task = asyncio.create_task(client.wait_for_output(job_id, timeout=120, poll_interval=3600))
            deadline = asyncio.get_running_loop().time() + 60
            while not _registered(conn, job_id):
                assert asyncio.get_running_loop().time() < deadline, "never registered"
                await asyncio.sleep(0.01)
            await client.cancel(job_id, "not needed")
            got = await asyncio.wait_for(task, 60)
            assert got == pgbackoff.FinishedJob(job_id, "cancelled", None)
            with pytest.raises(TimeoutError):
                await client.wait_for_output(await client.enqueue("wf-async-never"), timeout=0.3, poll_interval=3600)
            assert conn.execute("SELECT count(*) FROM backoff.job_awaiters").fetchone() == (0,)

    asyncio.run(main())
