"""Direct mode behind a router (pgbackoff.sharding): the hash rule, a job
id's shard, the layout, the shard's connection parameters; and a Worker in
direct mode against a database made to look like a router of one shard
(itself), and against one that is not a router."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
import pytest
from conftest import eventually
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool

import pgbackoff
from pgbackoff import AsyncWorker, Job, NotARouter, Queue, Worker
from pgbackoff.sharding import Layout, hash_shard, job_shard, read_layout, shard_params, split_by_shard


# The Go twin's answers (client/sharding QueueShard) for n = 3, 4, 1000.
VECTORS = {
    "emails": (0, 3, 119),
    "invoices": (1, 2, 314),
    "a": (0, 1, 177),
    "": (2, 1, 745),
    "déjà-vu": (1, 3, 131),
    "queue-17": (1, 2, 502),
}


def test_hash_shard_is_the_routers_rule() -> None:
    for queue, want in VECTORS.items():
        assert (hash_shard(queue, 3), hash_shard(queue, 4), hash_shard(queue, 1000)) == want, queue


def test_job_shard_is_the_ids_high_bits() -> None:
    assert job_shard(5) == 0
    assert job_shard((1 << 48) - 1) == 0
    assert job_shard(1 << 48) == 1
    assert job_shard((2 << 48) + 12345) == 2
    assert job_shard((7 << 48) | ((1 << 48) - 1)) == 7


def test_layout_placed_queue_else_hash() -> None:
    layout = Layout(version=3, hash_shards=3, shards=4, placed={"emails": 3})
    assert layout.queue_shard("emails") == 3
    assert layout.queue_shard("invoices") == 1  # hashed over hash_shards, not shards
    assert layout.queue_shard("queue-17") == 1


def test_split_by_shard_keeps_order() -> None:
    items = [(1 << 48) + 1, 2, (1 << 48) + 3, (2 << 48), 4]
    assert split_by_shard(items, lambda i: i) == {1: [(1 << 48) + 1, (1 << 48) + 3], 0: [2, 4], 2: [2 << 48]}


def test_shard_params_take_only_the_address() -> None:
    conninfo, kwargs = shard_params(
        "postgresql://app:secret@router.example:6432/jobs?sslmode=require&application_name=w1",
        {"host": "router.example", "port": 6432, "connect_timeout": 5},
        "host=10.0.0.7 port=5433 dbname=shard2",
    )
    got = conninfo_to_dict(conninfo)
    assert got == {
        "user": "app",
        "password": "secret",
        "sslmode": "require",
        "application_name": "w1",
        "host": "10.0.0.7",
        "port": "5433",
        "dbname": "shard2",
    }
    assert kwargs == {"connect_timeout": 5}
    # hostaddr replaces the user's too; nothing but the address is taken.
    conninfo, _ = shard_params("host=a hostaddr=10.1.1.1 dbname=r user=u", {}, "hostaddr=10.0.0.8 port=5 dbname=s user=other")
    assert conninfo_to_dict(conninfo) == {"user": "u", "hostaddr": "10.0.0.8", "port": "5", "dbname": "s"}


def make_router_of_itself(conn: psycopg.Connection[Any], db_url: str) -> None:
    """Give the test database a router's layout of one shard: itself."""
    info = conninfo_to_dict(db_url)
    address = " ".join(f"{k}={info[k]}" for k in ("host", "port", "dbname") if k in info)
    conn.execute(
        """CREATE TABLE backoff.router_layout (version bigint, hash_shards integer, shards integer);
        INSERT INTO backoff.router_layout VALUES (7, 1, 1);
        CREATE TABLE backoff.router_placements (queue text PRIMARY KEY, shard integer);
        INSERT INTO backoff.router_placements VALUES ('placed', 0)"""
    )
    conn.execute(
        "CREATE FUNCTION backoff.router_shards(OUT shard integer, OUT conninfo text) RETURNS SETOF record "
        "LANGUAGE sql AS $$ SELECT 0, %s::text $$".replace("%s", "'" + address.replace("'", "''") + "'")
    )
    conn.commit()


def test_read_layout(conn: psycopg.Connection[Any], db_url: str) -> None:
    with pytest.raises(NotARouter, match="not a pgbackoff router"):
        read_layout(conn)
    conn.rollback()
    make_router_of_itself(conn, db_url)
    layout = read_layout(conn)
    assert (layout.version, layout.hash_shards, layout.shards) == (7, 1, 1)
    assert layout.placed == {"placed": 0}
    assert "dbname=" in layout.addresses[0] and "user=" not in layout.addresses[0]


def test_worker_refuses_a_pool_that_is_not_a_routers(pool: ConnectionPool) -> None:
    worker = Worker(pool, [Queue("q", lambda job, ctx: None)], direct_shards=True)
    with pytest.raises(NotARouter, match="backoff.router_layout"):
        worker.run()


def test_async_worker_refuses_a_pool_that_is_not_a_routers(db_url: str) -> None:
    async def main() -> None:
        async with AsyncConnectionPool(db_url, min_size=1, max_size=6, open=False) as apool:
            worker = AsyncWorker(apool, [Queue("q", _async_noop)], direct_shards=True)
            with pytest.raises(NotARouter, match="backoff.router_layout"):
                await worker.run()

    asyncio.run(main())


async def _async_noop(job: Job, ctx: pgbackoff.Context) -> None:
    return None


def test_async_worker_in_direct_mode_claims_on_the_shard(conn: psycopg.Connection[Any], db_url: str, client: pgbackoff.Client) -> None:
    """As below, for the AsyncWorker: every job runs once and completes,
    through the shard's pool."""
    make_router_of_itself(conn, db_url)
    ids = [client.enqueue("placed", {"i": i}) for i in range(10)] + [client.enqueue("hashed", {"i": i}) for i in range(10)]
    seen: list[int] = []

    async def handler(job: Job, ctx: pgbackoff.Context) -> None:
        seen.append(job.id)

    async def main() -> tuple[AsyncConnectionPool, AsyncConnectionPool]:
        async with AsyncConnectionPool(db_url, min_size=1, max_size=6, open=False) as router:
            worker = AsyncWorker(router, [Queue("placed", handler), Queue("hashed", handler)], direct_shards=True, poll_interval=0.05)
            task = asyncio.create_task(worker.run())
            deadline = asyncio.get_running_loop().time() + 60
            while len(seen) < len(ids) and not task.done():
                assert asyncio.get_running_loop().time() < deadline, "every job handled"
                await asyncio.sleep(0.02)
            assert worker._shards is not None and set(worker._shards.pools) == {0}
            shard = worker._shards.pools[0]
            worker.stop()
            await task
            return router, shard

    router, shard = asyncio.run(main())
    assert shard is not router and shard.closed
    assert sorted(seen) == sorted(ids)
    row = conn.execute("SELECT count(*) FROM backoff.jobs WHERE id = ANY(%s) AND status = 'completed'", [ids]).fetchone()
    assert row == (len(ids),)


def test_worker_in_direct_mode_claims_on_the_shard(
    conn: psycopg.Connection[Any], db_url: str, client: pgbackoff.Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The database is its own only shard: the claims and completions go
    through the shard's pool, not the router's."""
    make_router_of_itself(conn, db_url)
    ids = [client.enqueue("placed", {"i": i}) for i in range(20)] + [client.enqueue("hashed", {"i": i}) for i in range(20)]
    seen: list[int] = []
    used: dict[str, set[int]] = {"claim": set(), "complete_many": set()}
    lock = threading.Lock()

    def spy(name: str) -> None:
        real = getattr(pgbackoff.Client, name)

        def call(self: pgbackoff.Client, *args: Any, **kwargs: Any) -> Any:
            with lock:
                used[name].add(id(self._db))
            return real(self, *args, **kwargs)

        monkeypatch.setattr(pgbackoff.Client, name, call)

    spy("claim")
    spy("complete_many")

    def handler(job: Job, ctx: pgbackoff.Context) -> None:
        with lock:
            seen.append(job.id)

    with ConnectionPool(db_url, min_size=1, max_size=6, open=True) as router:
        worker = Worker(router, [Queue("placed", handler), Queue("hashed", handler)], direct_shards=True, poll_interval=0.05)
        t = threading.Thread(target=worker.run)
        t.start()
        try:
            eventually(
                lambda: conn.execute("SELECT count(*) FROM backoff.jobs WHERE id = ANY(%s) AND status = 'completed'", [ids]).fetchone() == (len(ids),),
                timeout=60,
                what="every job completed",
            )
            assert worker._shards is not None and set(worker._shards.pools) == {0}
            shard = worker._shards.pools[0]
            assert shard is not router
        finally:
            worker.stop()
            t.join(60)
        assert not t.is_alive()
        assert shard.closed, "run() closes the shard pools"
    assert sorted(seen) == sorted(ids)
    assert used["claim"] == {id(shard)}
    assert used["complete_many"] == {id(shard)}
