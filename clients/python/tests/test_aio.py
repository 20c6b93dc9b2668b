"""AsyncClient and AsyncWorker against a real PostgreSQL (asyncio.run in
each test: no plugin needed)."""

from __future__ import annotations

import asyncio
import datetime as dt
import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
import pytest
from conftest import FakeClock, job_row
from psycopg_pool import AsyncConnectionPool

import pgbackoff
from pgbackoff import AsyncClient, AsyncWorker, Context, Job, NewJob, Queue


async def until(check: Callable[[], Awaitable[bool]], timeout: float = 10.0, what: str = "condition") -> None:
    """Wait for something the worker's tasks do (never for a backoff)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not await check():
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def with_pool(db_url: str, body: Callable[[AsyncConnectionPool], Awaitable[None]]) -> None:
    async def main() -> None:
        async with AsyncConnectionPool(db_url, min_size=1, max_size=10, kwargs={"autocommit": True}) as pool:
            await body(pool)

    asyncio.run(main())


def test_async_client_has_the_blocking_clients_calls() -> None:
    """The two clients' surfaces are written twice (a method is awaited in
    one, not in the other): the same public calls, with the same
    parameters, defaults and annotations; every call is a coroutine."""

    def calls(cls: type) -> dict[str, inspect.Signature]:
        return {n: inspect.signature(f) for n, f in vars(cls).items() if not n.startswith("_") and callable(f)}

    blocking, awaited = calls(pgbackoff.Client), calls(AsyncClient)
    assert sorted(awaited) == sorted(blocking)
    for name, sig in blocking.items():
        want = [(p.name, p.kind, p.default, p.annotation) for p in sig.parameters.values() if p.name != "db"]
        got = [(p.name, p.kind, p.default, p.annotation) for p in awaited[name].parameters.values() if p.name != "db"]
        assert got == want, name
        if name not in ("using", "now"):
            assert inspect.iscoroutinefunction(getattr(AsyncClient, name)), name
            assert awaited[name].return_annotation == sig.return_annotation, name


def test_async_worker_takes_the_workers_settings() -> None:
    """AsyncWorker's constructor is Worker's, written twice: the same
    keyword settings with the same defaults (the values are checked by
    the one Settings.of both call)."""

    def settings(cls: type) -> list[tuple[str, object, object]]:
        params = inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
        return [(p.name, p.kind, p.default) for p in params if p.name not in ("self", "pool")]

    assert settings(AsyncWorker) == settings(pgbackoff.Worker)


def test_async_client_calls(db_url: str, clock: FakeClock) -> None:
    async def body(pool: AsyncConnectionPool) -> None:
        c = AsyncClient(pool, worker_id="aio", now=clock)
        await c.check_schema()
        ids = await c.enqueue_many([NewJob("a", {"ü": "✓"}), NewJob("a", {"n": 2}, run_at=clock() + dt.timedelta(minutes=1))])
        (job,) = await c.claim("a", 10)
        assert job.id == ids[0] and job.payload == {"ü": "✓"}
        assert await c.heartbeat(job.id, job.attempt, extend=60) == clock() + dt.timedelta(seconds=60)
        failed = await c.fail(job.id, job.attempt, "nope", retryable=False)
        assert failed.dead_letter_reason == "non_retryable"
        with pytest.raises(pgbackoff.InvalidTransition):
            await c.complete(job.id, job.attempt)
        with pytest.raises(pgbackoff.NotReady):
            await c.acquire(ids[1])
        assert [o.replayed for o in await c.replay_dead_letters("a")] == [True]
        (st,) = await c.stats()
        assert (st.pending, st.dead_lettered) == (2, 0)

        async with pool.connection() as conn:  # the caller's transaction
            conn_tx: psycopg.AsyncConnection[Any] = conn
            await conn_tx.set_autocommit(False)
            await c.using(conn_tx).enqueue("tx", {"n": 1})
            await conn_tx.rollback()
            await conn_tx.set_autocommit(True)
        assert await c.claim("tx") == []

    with_pool(db_url, body)


def test_async_worker_outcomes(db_url: str, clock: FakeClock, conn: psycopg.Connection[Any]) -> None:
    async def handle(job: Job, ctx: Context) -> None:
        n = job.payload["n"]
        await asyncio.sleep(0)
        if n == 3:
            raise pgbackoff.Permanent("bad")
        if n == 4 and job.attempt == 1:
            raise pgbackoff.RetryAfter("later", 0)
        if n == 5 and job.attempt == 1:
            raise pgbackoff.Snooze(0)

    async def body(pool: AsyncConnectionPool) -> None:
        c = AsyncClient(pool, now=clock)
        ids = await c.enqueue_many([NewJob("aw", {"n": n}) for n in range(1, 9)])
        worker = AsyncWorker(pool, [Queue("aw", handle, concurrency=3)], poll_interval=0.05, now=clock)
        run = asyncio.create_task(worker.run())

        async def done() -> bool:
            (st,) = await c.stats()
            return st.completed == 7

        await until(done, what="7 completions")
        worker.stop()
        await asyncio.wait_for(run, 30)
        assert job_row(conn, ids[2])["dead_letter_reason"] == "non_retryable"
        assert job_row(conn, ids[3])["attempts"] == 2
        assert (job_row(conn, ids[4])["attempts"], job_row(conn, ids[4])["uncounted_attempts"]) == (2, 1)

    with_pool(db_url, body)


def test_async_shutdown_hands_back_a_running_job(db_url: str, clock: FakeClock, conn: psycopg.Connection[Any]) -> None:
    causes: list[BaseException | None] = []

    async def body(pool: AsyncConnectionPool) -> None:
        begun = asyncio.Event()

        async def handle(job: Job, ctx: Context) -> None:
            begun.set()
            try:
                await asyncio.sleep(30)
            finally:
                causes.append(ctx.cause)

        c = AsyncClient(pool, now=clock)
        job_id = await c.enqueue("as")
        worker = AsyncWorker(pool, [Queue("as", handle)], shutdown_timeout=0.1, now=clock)
        run = asyncio.create_task(worker.run())
        await asyncio.wait_for(begun.wait(), 10)
        run.cancel()  # as asyncio.run does on Ctrl-C: a graceful shutdown, then CancelledError
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(run, 30)
        row = job_row(conn, job_id)
        assert row["status"] == "retrying" and row["run_at"] == clock()
        assert row["last_error"].startswith("worker shutdown")

    with_pool(db_url, body)
    assert isinstance(causes[0], pgbackoff.WorkerShutdown)


def test_async_wake_up_through_listen(db_url: str, conn: psycopg.Connection[Any]) -> None:
    async def body(pool: AsyncConnectionPool) -> None:
        ran = asyncio.Event()

        async def handle(job: Job, ctx: Context) -> None:
            ran.set()

        worker = AsyncWorker(pool, [Queue("aw-wake", handle)], poll_interval=3600)
        run = asyncio.create_task(worker.run())

        async def registered() -> bool:
            row = conn.execute("SELECT count(*) FROM backoff.waiting_workers WHERE queue = 'aw-wake'").fetchone()
            return row == (1,)

        await until(registered, what="the worker's registration")
        await AsyncClient(pool).enqueue("aw-wake")
        await asyncio.wait_for(ran.wait(), 10)
        worker.stop()
        await asyncio.wait_for(run, 30)

    with_pool(db_url, body)


def test_async_heartbeat_keeps_the_lease(db_url: str, clock: FakeClock, conn: psycopg.Connection[Any]) -> None:
    async def body(pool: AsyncConnectionPool) -> None:
        release, begun = asyncio.Event(), asyncio.Event()

        async def handle(job: Job, ctx: Context) -> None:
            begun.set()
            await release.wait()

        c = AsyncClient(pool, now=clock)
        job_id = await c.enqueue("ah")
        worker = AsyncWorker(
            pool, [Queue("ah", handle, lease=30, heartbeat_interval=0.05)], reap_interval=None, listen=False, now=clock
        )
        run = asyncio.create_task(worker.run())
        await asyncio.wait_for(begun.wait(), 10)
        claimed_at = clock()
        clock.advance(25)

        async def extended() -> bool:
            return bool(job_row(conn, job_id)["lease_until"] == claimed_at + dt.timedelta(seconds=55))

        await until(extended, what="a heartbeat at the clock's new time")
        clock.advance(20)
        assert await c.reap() == 0
        release.set()
        worker.stop()
        await asyncio.wait_for(run, 30)
        assert job_row(conn, job_id)["status"] == "completed"

    with_pool(db_url, body)


def test_async_completion_whose_reply_was_lost_is_confirmed(
    db_url: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    """AsyncWorker: a repeated completion refused because the first call,
    whose reply was lost, completed the job counts as a completion."""
    caplog.set_level("INFO", logger="pgbackoff")

    async def body(pool: AsyncConnectionPool) -> None:
        client = AsyncClient(pool)
        await client.enqueue_many([NewJob("lost", {"n": n}) for n in range(2)])
        batched, alone = await client.claim("lost", 2)
        worker = AsyncWorker(pool, [Queue("lost", lambda job, ctx: None)], poll_interval=0.05)

        def lost_reply(real: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
            calls = 0

            async def call(*args: Any) -> Any:
                nonlocal calls
                calls += 1
                result = await real(*args)
                if calls == 1:
                    raise psycopg.OperationalError("server closed the connection unexpectedly")
                return result

            return call

        worker.client.complete_many = lost_reply(worker.client.complete_many)  # type: ignore[method-assign]
        worker.client.complete = lost_reply(worker.client.complete)  # type: ignore[method-assign]
        await worker._flush([(batched.id, batched.attempt, "lost", None)])
        await worker._complete_one(alone)
        for j in (batched, alone):
            assert job_row(conn, j.id)["status"] == "completed"

    with_pool(db_url, body)
    assert not [r for r in caplog.records if "refused" in r.getMessage()], caplog.text
    assert len([r for r in caplog.records if "confirmed" in r.getMessage()]) == 2, caplog.text


def test_async_worker_fires_due_schedules(db_url: str, clock: FakeClock, conn: psycopg.Connection[Any]) -> None:
    """AsyncWorker: the maintenance task fires a due slot at start and the
    worker runs its job."""
    conn.execute(
        "SELECT backoff.put_schedule('tick', 'aticks', p_every => '1 hour', p_anchor => %s, p_now => %s)",
        (clock() - dt.timedelta(minutes=90), clock() - dt.timedelta(minutes=90)),
    )

    async def body(pool: AsyncConnectionPool) -> None:
        ran: list[Job] = []

        async def handle(job: Job, ctx: Context) -> None:
            ran.append(job)

        worker = AsyncWorker(
            pool, [Queue("aticks", handle)], poll_interval=0.05, schedule_interval=3600, listen=False, now=clock
        )
        run = asyncio.create_task(worker.run())

        async def ran_once() -> bool:
            return len(ran) == 1

        await until(ran_once, what="the slot's job")
        worker.stop()
        await asyncio.wait_for(run, 30)
        (job,) = ran
        row = conn.execute("SELECT schedule, schedule_slot FROM backoff.jobs WHERE id = %s", (job.id,)).fetchone()
        assert row is not None and row[0] == "tick"
        assert clock() - dt.timedelta(hours=1) < row[1] <= clock()

    with_pool(db_url, body)


def test_async_worker_stops_when_a_call_loses_its_cancellation(
    db_url: str, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A maintenance call that loses the cancellation of its loop (a call
    that completes as the cancellation arrives) does not keep run() from
    returning: the loop is cancelled again."""

    async def body(pool: AsyncConnectionPool) -> None:
        async def handle(job: Job, ctx: Context) -> None:
            pass

        worker = AsyncWorker(pool, [Queue("lost-cancel", handle)], poll_interval=0.05, listen=False, now=clock)
        entered = asyncio.Event()
        look = worker._look_and_do

        async def losing(m: Any) -> None:
            if entered.is_set():
                return await look(m)
            entered.set()
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                pass  # lost

        monkeypatch.setattr(worker, "_look_and_do", losing)
        run = asyncio.create_task(worker.run())
        await asyncio.wait_for(entered.wait(), 30)
        worker.stop()
        await asyncio.wait_for(run, 30)

    with_pool(db_url, body)


def test_async_idle_worker_looks_once_for_all_its_queues(
    db_url: str, clock: FakeClock, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """AsyncWorker, as the threaded Worker (docs/adr/0083): parked queues,
    one look a poll interval, no claim and no queue_state while idle, and a
    job due later started by the first look after it is due."""
    from test_worker import IDLE_CALLS, idle_calls

    async def body(pool: AsyncConnectionPool) -> None:
        queues = [f"aidle-{i}" for i in range(5)]

        async def handle(job: Job, ctx: Context) -> None:
            pass

        worker = AsyncWorker(pool, [Queue(q, handle, concurrency=1) for q in queues], poll_interval=0.05, now=clock)
        counts = idle_calls(monkeypatch, worker.client)
        run = asyncio.create_task(worker.run())

        async def looks(n: int) -> None:
            async def done() -> bool:
                return counts["next_work"] >= n

            await until(done, what=f"{n} looks")

        async def parked() -> bool:
            return worker.listening and all(p.parked for p in worker.producers)

        await until(parked, what="every producer parked")
        await looks(counts["next_work"] + 2)
        before = dict(counts)
        await looks(before["next_work"] + 20)
        during = {n: counts[n] - before[n] for n in IDLE_CALLS}
        assert during["claim"] == 0 and during["queue_state"] == 0, during
        assert sum(during.values()) <= 2 * during["next_work"], during

        job_id = await AsyncClient(pool, now=clock).enqueue("aidle-3", {}, run_at=clock() + dt.timedelta(seconds=30))
        await looks(counts["next_work"] + 3)
        assert job_row(conn, job_id)["status"] == "pending", "not due yet"
        clock.advance(30)

        async def completed() -> bool:
            return bool(job_row(conn, job_id)["status"] == "completed")

        await until(completed, what="the job ran once due")
        worker.stop()
        await asyncio.wait_for(run, 30)

    with_pool(db_url, body)
