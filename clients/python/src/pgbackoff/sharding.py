"""Direct mode behind a PL/Proxy router (docs/sharding.md): a Worker given
``direct_shards=True`` reads the router's layout once and sends its claims
and its settling calls straight to the shards, with the pool's own
credentials and settings at each shard's address.

The rules are the router's: a queue placed explicitly
(``backoff.router_placements``) lives on its shard, any other on
:func:`hash_shard` of the layout's ``hash_shards``; a job lives on the
shard in its id's high bits (:func:`job_shard`). A layout change (a
placement, a queue moved) raises ``backoff.router_layout.version``: the
Worker reads the version again when a claim finds fewer jobs than asked
(at most once a second) and at each maintenance tick, and reads the whole
layout again when it changed.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import AsyncConnectionPool, ConnectionPool

from .errors import NotARouter

T = TypeVar("T")

#: A job id's shard is its bits above this one (docs/adr/0034).
SHARD_SHIFT = 48
#: The connection parameters a shard's address replaces.
ADDRESS_KEYS = ("host", "hostaddr", "port", "dbname")
#: At most one read of the layout's version per this many seconds from
#: claims that found fewer jobs than asked.
FOLLOW_EVERY = 1.0
#: ... and per this many from the maintenance ticks, which come every
#: second when idle: an idle Worker reads it 0.2 times a second.
FOLLOW_IDLE_EVERY = 5.0

IS_ROUTER_SQL = "SELECT to_regclass('backoff.router_layout') IS NOT NULL"
LAYOUT_SQL = "SELECT version, hash_shards, shards FROM backoff.router_layout"
VERSION_SQL = "SELECT version FROM backoff.router_layout"
PLACEMENTS_SQL = "SELECT queue, shard FROM backoff.router_placements"
SHARDS_SQL = "SELECT shard, conninfo FROM backoff.router_shards()"


def hash_shard(queue: str, n: int) -> int:
    """The router's hash rule (``backoff._hash_shard``): the first four bytes
    of the MD5 of the queue's name, big-endian, as a non-negative int32,
    modulo n. Only for a queue that is not placed, with n the layout's
    ``hash_shards``."""
    d = hashlib.md5(queue.encode("utf-8")).digest()
    return (int.from_bytes(d[:4], "big") & 0x7FFFFFFF) % n


def job_shard(job_id: int) -> int:
    """The shard that holds a job: its id's high bits."""
    return job_id >> SHARD_SHIFT


@dataclass(frozen=True)
class Layout:
    """A router's layout as one read saw it."""

    version: int
    hash_shards: int
    shards: int
    #: Queues placed explicitly, with their shards.
    placed: Mapping[str, int] = field(default_factory=dict)
    #: Each shard's address (host, hostaddr, port, dbname only).
    addresses: Mapping[int, str] = field(default_factory=dict)

    def queue_shard(self, queue: str) -> int:
        """The shard that holds queue: its placement, else the hash rule."""
        k = self.placed.get(queue)
        return k if k is not None else hash_shard(queue, self.hash_shards)


def split_by_shard(items: Iterable[T], job_id: Callable[[T], int]) -> dict[int, list[T]]:
    """items grouped by their job's shard, in their order."""
    out: dict[int, list[T]] = {}
    for it in items:
        out.setdefault(job_shard(job_id(it)), []).append(it)
    return out


def shard_params(conninfo: str, kwargs: Mapping[str, Any], address: str) -> tuple[str, dict[str, Any]]:
    """The user's conninfo and connection kwargs (user, password, TLS,
    options...) pointed at a shard: host, hostaddr, port and dbname are the
    shard's address's, nothing else of it is taken."""
    params = {k: v for k, v in conninfo_to_dict(conninfo).items() if k not in ADDRESS_KEYS}
    at = {k: v for k, v in conninfo_to_dict(address).items() if k in ADDRESS_KEYS}
    rest = {k: v for k, v in kwargs.items() if k not in ADDRESS_KEYS}
    return make_conninfo(**params, **at), rest


def _layout(rows: Sequence[Any], placed: Sequence[Any], shards: Sequence[Any]) -> Layout:
    if not rows:
        raise NotARouter("read the router's layout", "backoff.router_layout has no row")
    version, hash_shards, n = rows[0]
    return Layout(
        version=int(version),
        hash_shards=int(hash_shards),
        shards=int(n),
        placed={str(q): int(k) for q, k in placed},
        addresses={int(k): str(c) for k, c in shards},
    )


NOT_A_ROUTER = (
    "the pool is not a pgbackoff router's: its database has no backoff.router_layout "
    "(direct_shards needs a connection to a router, docs/sharding.md)"
)


def read_layout(conn: psycopg.Connection[Any]) -> Layout:
    """Read a router's layout and its shards' addresses (a few statements,
    one transaction). NotARouter when the database is not a router's."""
    with conn.transaction():
        row = conn.execute(IS_ROUTER_SQL).fetchone()
        if not row or not row[0]:
            raise NotARouter("read the router's layout", NOT_A_ROUTER)
        return _layout(
            conn.execute(LAYOUT_SQL).fetchall(),
            conn.execute(PLACEMENTS_SQL).fetchall(),
            conn.execute(SHARDS_SQL).fetchall(),
        )


async def read_layout_async(conn: psycopg.AsyncConnection[Any]) -> Layout:
    """read_layout, awaited."""
    async with conn.transaction():
        row = await (await conn.execute(IS_ROUTER_SQL)).fetchone()
        if not row or not row[0]:
            raise NotARouter("read the router's layout", NOT_A_ROUTER)
        return _layout(
            await (await conn.execute(LAYOUT_SQL)).fetchall(),
            await (await conn.execute(PLACEMENTS_SQL)).fetchall(),
            await (await conn.execute(SHARDS_SQL)).fetchall(),
        )


def _version(row: Any) -> int:
    if not row:
        raise NotARouter("read the router's layout version", "backoff.router_layout has no row")
    return int(row[0])


class _Follower:
    """When to read the version again: at most once per FOLLOW_EVERY from
    claims, once per FOLLOW_IDLE_EVERY from the maintenance tick (tick)."""

    def __init__(self) -> None:
        self.last = 0.0

    def due(self, tick: bool) -> bool:
        now = time.monotonic()
        if now - self.last < (FOLLOW_IDLE_EVERY if tick else FOLLOW_EVERY):
            return False
        self.last = now
        return True


class Shards:
    """A Worker's shard pools, opened from a router's pool (threaded
    Worker). Pools open when a queue or a job first needs their shard and
    stay open until close()."""

    def __init__(self, router: ConnectionPool, size: int, queues: Sequence[str]) -> None:
        self.router = router
        self.size = size
        self.queues = list(queues)
        self.layout: Layout | None = None
        self.pools: dict[int, ConnectionPool] = {}
        self._lock = threading.Lock()
        self._follow = _Follower()

    def open(self) -> Layout:
        with self.router.connection() as conn:
            layout = read_layout(conn)
        with self._lock:
            self.layout = layout
        for q in self.queues:
            self.pool(layout.queue_shard(q))
        return layout

    def served(self) -> dict[int, str]:
        """The shards of the served queues, with their addresses."""
        layout = self._layout()
        return {k: layout.addresses[k] for k in sorted({layout.queue_shard(q) for q in self.queues}) if k in layout.addresses}

    def _layout(self) -> Layout:
        if self.layout is None:
            raise RuntimeError("the router's layout is not read yet")
        return self.layout

    def queue_shard(self, queue: str) -> int:
        return self._layout().queue_shard(queue)

    def pool(self, shard: int) -> ConnectionPool:
        with self._lock:
            p = self.pools.get(shard)
            if p is not None:
                return p
            address = self._layout().addresses.get(shard)
            if address is None:
                raise NotARouter("connect to a shard", f"the router lists no shard {shard}")
            conninfo, kwargs = shard_params(self.router.conninfo, self.router.kwargs, address)
            p = ConnectionPool(conninfo, kwargs=kwargs, min_size=1, max_size=self.size, open=True, name=f"pgbackoff-shard-{shard}")
            self.pools[shard] = p
            return p

    def follow(self, tick: bool = False) -> bool:
        """Read the layout's version (at most once a second, or five from a
        maintenance tick);
        when it changed, read the layout again. True when it changed."""
        if not self._follow.due(tick):
            return False
        with self.router.connection() as conn:
            version = _version(conn.execute(VERSION_SQL).fetchone())
            conn.commit()
        if self.layout is not None and version == self.layout.version:
            return False
        self.open()
        return True

    def close(self) -> None:
        with self._lock:
            pools, self.pools = list(self.pools.values()), {}
        for p in pools:
            p.close()


class AsyncShards:
    """Shards, for the AsyncWorker (one event loop: no lock)."""

    def __init__(self, router: AsyncConnectionPool, size: int, queues: Sequence[str]) -> None:
        self.router = router
        self.size = size
        self.queues = list(queues)
        self.layout: Layout | None = None
        self.pools: dict[int, AsyncConnectionPool] = {}
        self._follow = _Follower()
        self._opening: asyncio.Lock | None = None

    async def open(self) -> Layout:
        async with self.router.connection() as conn:
            layout = await read_layout_async(conn)
        self.layout = layout
        for q in self.queues:
            await self.pool(layout.queue_shard(q))
        return layout

    def _layout(self) -> Layout:
        if self.layout is None:
            raise RuntimeError("the router's layout is not read yet")
        return self.layout

    def served(self) -> dict[int, str]:
        layout = self._layout()
        return {k: layout.addresses[k] for k in sorted({layout.queue_shard(q) for q in self.queues}) if k in layout.addresses}

    def queue_shard(self, queue: str) -> int:
        return self._layout().queue_shard(queue)

    async def pool(self, shard: int) -> AsyncConnectionPool:
        p = self.pools.get(shard)
        if p is not None:
            return p
        if self._opening is None:
            self._opening = asyncio.Lock()
        async with self._opening:
            p = self.pools.get(shard)
            if p is not None:
                return p
            address = self._layout().addresses.get(shard)
            if address is None:
                raise NotARouter("connect to a shard", f"the router lists no shard {shard}")
            conninfo, kwargs = shard_params(self.router.conninfo, self.router.kwargs, address)
            p = AsyncConnectionPool(conninfo, kwargs=kwargs, min_size=1, max_size=self.size, open=False, name=f"pgbackoff-shard-{shard}")
            await p.open()
            self.pools[shard] = p
            return p

    async def follow(self, tick: bool = False) -> bool:
        if not self._follow.due(tick):
            return False
        async with self.router.connection() as conn:
            version = _version(await (await conn.execute(VERSION_SQL)).fetchone())
            await conn.commit()
        if self.layout is not None and version == self.layout.version:
            return False
        await self.open()
        return True

    async def close(self) -> None:
        pools, self.pools = list(self.pools.values()), {}
        for p in pools:
            await p.close()
