"""Enqueues of a queue that is moving away from this shard (SQLSTATE
55006): a client on a pool enqueues again until the move lets it, a client
on a connection raises QueueMoving at once. The queue is marked as the
mover marks a shard it leaves (backoff._transfer_mark, docs/adr/0092)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from conftest import eventually
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from pgbackoff import AsyncClient, Client, Graph, NewJob, QueueMoving, _moving

QUEUE = "moving"


def mark(conn: psycopg.Connection[Any], queue: str = QUEUE) -> None:
    """Mark the queue as moving to shard 2, as the mover does on the shard it leaves."""
    conn.execute("SELECT backoff._transfer_mark(%s, 'out', 2, 1)", (queue,))


def unmark(conn: psycopg.Connection[Any], queue: str = QUEUE) -> None:
    """Remove the queue's mark (a NULL direction)."""
    conn.execute("SELECT backoff._transfer_mark(%s, NULL, NULL, NULL)", (queue,))


@pytest.fixture
def tries(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The enqueue calls the clients send (the operation of each), counted
    where both clients run every call."""
    seen: list[str] = []
    sync_run, async_run = Client._run, AsyncClient._run

    def run(self: Client, call: Any) -> Any:
        if call.op.startswith("enqueue"):
            seen.append(call.op)
        return sync_run(self, call)

    async def arun(self: AsyncClient, call: Any) -> Any:
        if call.op.startswith("enqueue"):
            seen.append(call.op)
        return await async_run(self, call)

    monkeypatch.setattr(Client, "_run", run)
    monkeypatch.setattr(AsyncClient, "_run", arun)
    yield seen


ENQUEUES: dict[str, Callable[[Client], object]] = {
    "enqueue": lambda c: c.enqueue(QUEUE, {"n": 1}),
    "enqueue_many": lambda c: c.enqueue_many([NewJob(QUEUE, {"n": 1}), NewJob(QUEUE, {"n": 2})]),
    "enqueue_graph": lambda c: c.enqueue_graph(Graph().add("a", QUEUE).add("b", QUEUE, depends_on=["a"])),
}


@pytest.mark.parametrize("method", list(ENQUEUES))
def test_on_a_connection_raises_at_once(db_url: str, conn: psycopg.Connection[Any], tries: list[str], method: str) -> None:
    mark(conn)
    with psycopg.connect(db_url) as mine:
        start = time.monotonic()
        with pytest.raises(QueueMoving) as err:
            ENQUEUES[method](Client(mine))
        assert time.monotonic() - start < _moving.QUEUE_MOVE_WAIT / 2
        assert len(tries) == 1, "not tried again in the caller's transaction"
        assert err.value.sqlstate == "55006" and err.value.pgerror is not None
        assert 'moves to shard 2' in str(err.value)
        mine.rollback()
    with psycopg.connect(db_url, autocommit=True) as mine:
        with pytest.raises(QueueMoving):
            ENQUEUES[method](Client(mine))
        assert len(tries) == 2


def test_on_a_pool_enqueues_once_the_mark_is_gone(pool: ConnectionPool, conn: psycopg.Connection[Any], tries: list[str]) -> None:
    mark(conn)
    result: list[object] = []
    errors: list[BaseException] = []

    def enqueue() -> None:
        try:
            result.append(Client(pool).enqueue(QUEUE, {"n": 1}))
        except BaseException as e:
            errors.append(e)

    t = threading.Thread(target=enqueue)
    t.start()
    try:
        eventually(lambda: len(tries) >= 2, timeout=_moving.QUEUE_MOVE_WAIT / 2, what="the enqueue tried again")
        assert not result and not errors, "still refused while marked"
    finally:
        unmark(conn)
        t.join(60)
    assert not errors, errors
    assert len(result) == 1 and isinstance(result[0], int)
    row = conn.execute("SELECT queue FROM backoff.jobs WHERE id = %s", (result[0],)).fetchone()
    assert row == (QUEUE,)


@pytest.mark.parametrize("method", list(ENQUEUES))
def test_on_a_pool_gives_up_after_the_bound(
    pool: ConnectionPool, conn: psycopg.Connection[Any], tries: list[str], monkeypatch: pytest.MonkeyPatch, method: str
) -> None:
    monkeypatch.setattr(_moving, "QUEUE_MOVE_WAIT", 0.3)
    mark(conn)
    start = time.monotonic()
    with pytest.raises(QueueMoving):
        ENQUEUES[method](Client(pool))
    assert time.monotonic() - start >= 0.3
    assert len(tries) > 1, "tried again"
    assert conn.execute("SELECT count(*) FROM backoff.jobs").fetchone() == (0,)


def test_async_client(db_url: str, conn: psycopg.Connection[Any], tries: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """AsyncClient: at once on a connection; on a pool until the mark is
    gone, or QueueMoving after the bound."""

    async def main() -> None:
        mark(conn)
        async with await psycopg.AsyncConnection.connect(db_url) as mine:
            with pytest.raises(QueueMoving):
                await AsyncClient(mine).enqueue(QUEUE)
            assert len(tries) == 1
        async with AsyncConnectionPool(db_url, min_size=1, max_size=4, kwargs={"autocommit": True}) as pool:
            client = AsyncClient(pool)
            pending = asyncio.create_task(client.enqueue(QUEUE, {"n": 1}))
            deadline = time.monotonic() + _moving.QUEUE_MOVE_WAIT / 2
            while len(tries) < 3:
                assert time.monotonic() < deadline, "the enqueue tried again"
                await asyncio.sleep(0.01)
            assert not pending.done(), "still refused while marked"
            unmark(conn)
            job_id = await asyncio.wait_for(pending, 60)
            assert conn.execute("SELECT queue FROM backoff.jobs WHERE id = %s", (job_id,)).fetchone() == (QUEUE,)

            mark(conn)
            monkeypatch.setattr(_moving, "QUEUE_MOVE_WAIT", 0.3)
            before = len(tries)
            with pytest.raises(QueueMoving):
                await client.enqueue_graph(Graph().add("a", QUEUE))
            assert len(tries) - before > 1, "tried again"

    asyncio.run(main())
