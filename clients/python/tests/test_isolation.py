"""In a database whose default_transaction_isolation is REPEATABLE READ or
SERIALIZABLE, the clients run each call at READ COMMITTED (docs/adr/0080):
over a pool, and over a connection of the caller's in autocommit; a call
in the caller's transaction runs at its level; a failed call leaves its
connection idle; the pool's connections are left as they were."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from conftest import FakeClock
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import pgbackoff
from pgbackoff import _sql

LEVELS = ["repeatable read", "serializable"]

#: A probe through the client's own path: the level of the transaction
#: each of three rows is read in.
PROBE = _sql.Call(
    "probe", "SELECT current_setting('transaction_isolation') FROM generate_series(1, 3)", (), lambda rows: [r[0] for r in rows]
)
FAILING = _sql.Call("fail on purpose", "SELECT 1/0", (), lambda rows: rows)
#: True in a statement that opened its own (implicit) transaction, False in
#: one that a BEGIN opened before it.
ALONE = _sql.Call("probe", "SELECT now() = statement_timestamp()", (), lambda rows: rows[0][0])


def set_default_level(db_url: str, level: str) -> None:
    """ALTER DATABASE ... SET default_transaction_isolation, as a user's
    database might; sessions opened after it start there."""
    name = conninfo_to_dict(db_url)["dbname"]
    with psycopg.connect(db_url, autocommit=True) as c:
        stmt = sql.SQL("ALTER DATABASE {} SET default_transaction_isolation = {}")
        c.execute(stmt.format(sql.Identifier(name), sql.Literal(level)))


@pytest.fixture(params=LEVELS)
def level_url(request: pytest.FixtureRequest, db_url: str) -> Iterator[tuple[str, str]]:
    """(a fresh database whose default is the level, the level)."""
    with psycopg.connect(db_url, autocommit=True) as c:
        # Small segments, so that two jobs fill one and rotate switches.
        c.execute("UPDATE backoff.settings SET segment_jobs = 2")
    set_default_level(db_url, request.param)
    yield db_url, request.param


def filenode(conn: psycopg.Connection[Any], relation: str) -> int:
    """The relation's file: TRUNCATE gives it a new one."""
    row = conn.execute("SELECT pg_relation_filenode(%s::regclass)", (relation,)).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("autocommit", [True, False], ids=["autocommit", "transactions"])
def test_calls_over_a_pool_run_at_read_committed(level_url: tuple[str, str], autocommit: bool, clock: FakeClock) -> None:
    url, level = level_url
    with (
        ConnectionPool(url, min_size=1, max_size=1, kwargs={"autocommit": autocommit}) as pool,
        psycopg.connect(url, autocommit=True) as look,
    ):
        with pool.connection() as conn:
            assert conn.execute("SHOW transaction_isolation").fetchone() == (level,)
            conn.rollback()
        client = pgbackoff.Client(pool, worker_id="w", now=clock)
        assert client._run(PROBE) == ["read committed"] * 3

        # The client's calls end to end, rotate's truncate included.
        ids = [client.enqueue("q", {"n": n}) for n in range(2)]
        row = look.execute("SELECT segment FROM backoff.segments WHERE current").fetchone()
        assert row is not None
        segment = f"backoff.jobs_live_{row[0]}"
        assert client.rotate() >= 2, "two jobs fill the segment: rotate switches and moves them"
        before = filenode(look, segment)
        client.rotate()
        assert filenode(look, segment) != before, f"rotate truncated the segment it left, {segment}"
        jobs = client.claim("q", 2)
        assert sorted(j.id for j in jobs) == sorted(ids)
        assert client.complete_many([j.id for j in jobs], [j.attempt for j in jobs]) == [j.id for j in jobs]

        # A failing call: its error, and the connection back idle.
        with pytest.raises(psycopg.errors.DivisionByZero):
            client._run(FAILING)
        with pytest.raises(pgbackoff.JobNotFound):
            client.complete(10**12, 1)
        with pool.connection() as conn:
            assert conn.info.transaction_status == TransactionStatus.IDLE
        assert client._run(PROBE) == ["read committed"] * 3

        # The pool's connection is as it was: its autocommit, its level.
        with pool.connection() as conn:
            assert conn.autocommit is autocommit
            assert conn.isolation_level is None
            assert conn.execute("SHOW transaction_isolation").fetchone() == (level,)
            conn.rollback()


def test_calls_on_a_connection(level_url: tuple[str, str], clock: FakeClock) -> None:
    url, level = level_url
    with psycopg.connect(url, autocommit=True) as conn:
        client = pgbackoff.Client(conn, now=clock)
        assert client._run(PROBE) == ["read committed"] * 3
        with pytest.raises(psycopg.errors.DivisionByZero):
            client._run(FAILING)
        assert conn.info.transaction_status == TransactionStatus.IDLE
        job_id = client.enqueue("q")
        assert [j.id for j in client.claim("q")] == [job_id]

        # In the caller's transaction: its level, and it stays open.
        with conn.transaction():
            assert client._run(PROBE) == [level] * 3
            assert conn.info.transaction_status == TransactionStatus.INTRANS
    with psycopg.connect(url) as conn:
        # Outside autocommit, the call is in the transaction psycopg opens
        # for the caller, who commits it.
        client = pgbackoff.Client(conn, now=clock)
        assert client._run(PROBE) == [level] * 3
        assert conn.info.transaction_status == TransactionStatus.INTRANS
        conn.rollback()


def test_without_pipeline_mode(level_url: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Where libpq has no pipeline mode, BEGIN, the statement and COMMIT go
    one after the other, with the same results."""
    monkeypatch.setattr(psycopg.Pipeline, "is_supported", classmethod(lambda cls: False))
    monkeypatch.setattr(psycopg.AsyncPipeline, "is_supported", classmethod(lambda cls: False))
    url, _ = level_url
    with ConnectionPool(url, min_size=1, max_size=1, kwargs={"autocommit": True}) as pool:
        client = pgbackoff.Client(pool)
        assert client._run(PROBE) == ["read committed"] * 3
        with pytest.raises(psycopg.errors.DivisionByZero):
            client._run(FAILING)
        with pool.connection() as conn:
            assert conn.info.transaction_status == TransactionStatus.IDLE
        assert client._run(PROBE) == ["read committed"] * 3
    check_async(url)


def check_async(url: str, autocommit: bool = True) -> None:
    async def run() -> None:
        async with AsyncConnectionPool(url, min_size=1, max_size=1, kwargs={"autocommit": autocommit}) as pool:
            client = pgbackoff.AsyncClient(pool)
            assert await client._run(PROBE) == ["read committed"] * 3
            with pytest.raises(psycopg.errors.DivisionByZero):
                await client._run(FAILING)
            async with pool.connection() as conn:
                assert conn.info.transaction_status == TransactionStatus.IDLE
            job_id = await client.enqueue("aq")
            jobs = await client.claim("aq")
            assert [j.id for j in jobs] == [job_id]
            await client.complete(job_id, jobs[0].attempt)
            async with pool.connection() as conn:
                assert conn.autocommit is autocommit
                # The pool's own level, unchanged.
                same = "SELECT current_setting('transaction_isolation') = current_setting('default_transaction_isolation')"
                assert await (await conn.execute(same)).fetchone() == (True,)
                await conn.rollback()

    asyncio.run(run())


@pytest.mark.parametrize("autocommit", [True, False], ids=["autocommit", "transactions"])
def test_async_calls_run_at_read_committed(level_url: tuple[str, str], autocommit: bool) -> None:
    check_async(level_url[0], autocommit)


def test_async_calls_on_a_connection(level_url: tuple[str, str]) -> None:
    url, level = level_url

    async def run() -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            client = pgbackoff.AsyncClient(conn)
            assert await client._run(PROBE) == ["read committed"] * 3
            async with conn.transaction():
                assert await client._run(PROBE) == [level] * 3

    asyncio.run(run())


def test_a_read_committed_database_gets_each_statement_alone(db_url: str) -> None:
    """Where the sessions start at READ COMMITTED, a call is its statement
    alone, in the implicit transaction of its own, as before."""
    set_default_level(db_url, "read committed")
    with ConnectionPool(db_url, min_size=1, max_size=1, kwargs={"autocommit": True}) as pool:
        client = pgbackoff.Client(pool)
        assert client._run(PROBE) == ["read committed"] * 3
        assert client._run(ALONE) is True


#: A call that waits for the advisory lock the test holds.
WAITS = _sql.Call("wait", "SELECT pg_advisory_xact_lock(4242)", (), lambda rows: rows)


@pytest.mark.parametrize("pipeline", [True, False], ids=["pipeline", "no-pipeline"])
def test_async_call_cut_short_is_cancelled(level_url: tuple[str, str], monkeypatch: pytest.MonkeyPatch, pipeline: bool) -> None:
    """A task cancelled while its call runs in its own READ COMMITTED
    transaction ends in CancelledError, never in the error of the
    connection left busy: the AsyncWorker stops its loops by cancelling
    them, and a loop that logs errors and goes on would outlive it."""
    if not pipeline:
        monkeypatch.setattr(psycopg.AsyncPipeline, "is_supported", classmethod(lambda cls: False))
    waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'advisory' AND query = %s"

    async def run() -> None:
        async with AsyncConnectionPool(level_url[0], min_size=1, max_size=2, kwargs={"autocommit": True}) as pool:
            client = pgbackoff.AsyncClient(pool)
            assert await client._run(PROBE) == ["read committed"] * 3
            async with await psycopg.AsyncConnection.connect(level_url[0], autocommit=True) as holder:
                await holder.execute("SELECT pg_advisory_lock(4242)")
                call = asyncio.create_task(client._run(WAITS))
                while await (await holder.execute(waiting, (WAITS.sql,))).fetchone() != (1,):
                    await asyncio.sleep(0.01)
                call.cancel()
                await holder.execute("SELECT pg_advisory_unlock(4242)")
                with pytest.raises(asyncio.CancelledError):
                    await asyncio.wait_for(call, 30)
            # The pool still hands out working connections.
            assert await client._run(PROBE) == ["read committed"] * 3

    asyncio.run(run())
