"""The asyncio variant: AsyncClient and AsyncWorker, on psycopg's async
connections and pool. Same calls, same decisions as the blocking ones
(see client.py and worker.py); handlers are coroutines, and a handler
asked to stop is cancelled (CancelledError) with ``ctx.cause`` saying why.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import AsyncConnectionPool

from . import _moving, _pacing, _sql
from ._outcome import Context, Outcome
from ._settling import Completion, attempt_outcome, batch_outputs, batched, output_refused, confirm_failed, confirmed, failed, fired, ids_and_attempts, is_lost, lease_left, not_recorded, reaped, refusals, settled_queues, snooze_delay
from .client import BEGIN_READ_COMMITTED, MISSING_SCHEMA, READ_DEFAULT_LEVEL, Clock, can_run_alone, default_worker_id, missing_schema, schema_too_old
from .errors import InvalidArgument, LeaseExpired, LeaseLost, WorkerShutdown, reraise, transient
from .types import DeadLetterGroup, Duration, Job, JobDetail, NewJob, QueueState, QueueStats, ReplayOutcome, ScheduleFire, as_seconds
from .workflows import FINISHED, FinishedJob, GraphLike, ParentOutput, encode_json, graph_text
from .sharding import AsyncShards, job_shard, shard_params, split_by_shard
from .worker import MAX_COMPLETE_BATCH, SETTLE_TRIES, Queue, Row, Settings, _raw
from .workflows import RawJSON

log = logging.getLogger("pgbackoff")
T = TypeVar("T")

AsyncDB = AsyncConnectionPool | psycopg.AsyncConnection[Any]

#: A coroutine that runs one attempt of a job (see worker.Handler).
AsyncHandler = Callable[[Job, Context], Awaitable[None]]


class AsyncClient:
    """The calls of :class:`pgbackoff.Client`, awaited, on an
    AsyncConnectionPool or an AsyncConnection (the call joins its open
    transaction, if any)."""

    def __init__(self, db: AsyncDB, *, worker_id: str | None = None, now: Clock | None = None) -> None:
        self._db = db
        self.worker_id = worker_id or default_worker_id()
        self._now = now
        # See Client: whether db's sessions start at another level than READ
        # COMMITTED; None: not read yet.
        self._other_level: bool | None = None

    def using(self, db: AsyncDB) -> AsyncClient:
        return AsyncClient(db, worker_id=self.worker_id, now=self._now)

    def now(self) -> dt.datetime | None:
        return self._now() if self._now is not None else None

    async def _run(self, call: _sql.Call[T]) -> T:
        try:
            if isinstance(self._db, AsyncConnectionPool):
                async with self._db.connection() as conn:
                    rows = await self._fetch(conn, call, pooled=True)
            else:
                rows = await self._fetch(self._db, call, pooled=False)
        except psycopg.Error as e:
            reraise(call.op, e)
        return call.decode(rows)

    async def _enqueue(self, call: _sql.Call[T]) -> T:
        """Client._enqueue, awaited: on a pool, again while the queue is
        moving to another shard; cancelling the task ends the wait."""
        if isinstance(self._db, AsyncConnectionPool):
            return await _moving.retry_while_moving_async(lambda: self._run(call))
        return await self._run(call)

    async def _fetch(self, conn: psycopg.AsyncConnection[Any], call: _sql.Call[Any], *, pooled: bool) -> _sql.Rows:
        """Run the call at READ COMMITTED, as Client._fetch does."""
        if not can_run_alone(conn, pooled):
            return await _fetch(conn, call)
        if self._other_level is None:
            self._other_level = await _other_default_level(conn)
        if not self._other_level:
            return await _fetch(conn, call)
        return await _fetch_read_committed(conn, call)

    async def schema_version(self) -> int | None:
        return await self._run(_sql.schema_version())

    async def check_schema(self) -> None:
        try:
            have = await self.schema_version()
        except MISSING_SCHEMA as e:
            raise missing_schema(e) from e
        if (err := schema_too_old(have)) is not None:
            raise err

    async def enqueue(
        self,
        queue: str,
        payload: Any = None,
        *,
        run_at: dt.datetime | None = None,
        max_attempts: int | None = None,
        priority: int = 0,
        dedupe_key: str | None = None,
        policy: str | None = None,
    ) -> int:
        return await self._enqueue(
            _sql.enqueue(
                queue, payload, run_at=run_at, max_attempts=max_attempts, priority=priority,
                dedupe_key=dedupe_key, policy=policy, now=self.now(),
            )
        )  # fmt: skip

    async def enqueue_many(self, jobs: Sequence[NewJob]) -> list[int]:
        if not jobs:
            return []
        return await self._enqueue(_sql.enqueue_many(jobs, self.now()))

    async def claim(self, queue: str, limit: int = 1, *, lease: Duration | None = None) -> list[Job]:
        return await self._run(_sql.claim(queue, self.worker_id, limit, lease, self.now()))

    async def acquire(self, job_id: int, *, lease: Duration | None = None) -> Job:
        return await self._run(_sql.acquire(job_id, self.worker_id, lease, self.now()))

    async def complete(self, job_id: int, attempt: int) -> Job:
        return await self._run(_sql.complete(job_id, attempt, self.now()))

    async def complete_with_output(self, job_id: int, attempt: int, output: Any) -> Job:
        op = f"complete job {job_id} (attempt {attempt})"
        return await self._run(_sql.complete(job_id, attempt, self.now(), encode_json(op + ": output", output)))

    async def complete_many(
        self, job_ids: Sequence[int], attempts: Sequence[int], outputs: Sequence[Any] | None = None
    ) -> list[int]:
        texts = None if outputs is None else [None if o is None else encode_json(f"complete {len(job_ids)} jobs: output", o) for o in outputs]
        return await self._run(_sql.complete_many(job_ids, attempts, self.now(), texts))

    async def completed_by(self, job_ids: Sequence[int], attempts: Sequence[int]) -> list[int]:
        return await self._run(_sql.completed_by(job_ids, attempts))

    async def fail(
        self,
        job_id: int,
        attempt: int,
        error: str,
        *,
        retry_in: Duration | None = None,
        retryable: bool = True,
    ) -> Job:
        return await self._run(
            _sql.fail(job_id, attempt, error, retry_in=retry_in, retryable=retryable, now=self.now())
        )

    async def heartbeat(self, job_id: int, attempt: int, *, extend: Duration | None = None) -> dt.datetime:
        return await self._run(_sql.heartbeat(job_id, attempt, extend, self.now()))

    async def heartbeat_progress(self, job_id: int, attempt: int, progress: Any, *, extend: Duration | None = None) -> dt.datetime:
        op = f"heartbeat job {job_id} (attempt {attempt})"
        return await self._run(_sql.heartbeat(job_id, attempt, extend, self.now(), encode_json(op + ": progress", progress)))

    async def enqueue_graph(self, graph: GraphLike) -> dict[str, int]:
        return await self._enqueue(_sql.enqueue_graph(*graph_text(graph), self.now()))

    async def job_output(self, job_id: int) -> Any:
        return await self._run(_sql.job_output(job_id))

    async def parent_outputs(self, job_id: int) -> list[ParentOutput]:
        return await self._run(_sql.parent_outputs(job_id))

    async def wait_for_output(self, job_id: int, *, timeout: Duration = 60.0, poll_interval: Duration = 1.0) -> FinishedJob:
        """Client.wait_for_output, awaited: LISTEN on a connection of the
        AsyncConnectionPool, polling on a connection."""
        deadline = time.monotonic() + as_seconds(timeout)
        poll = as_seconds(poll_interval)
        ttl = max(60.0, 3 * poll)
        listening = _listening(self._db) if isinstance(self._db, AsyncConnectionPool) else contextlib.nullcontext(None)
        async with listening as conn:
            registered = False
            try:
                while True:
                    status = await self._run(_sql.await_job(job_id, self.worker_id, ttl))
                    if status in FINISHED:
                        return FinishedJob(job_id, status, await self.job_output(job_id))
                    registered = True
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"wait for the output of job {job_id}: not finished after {as_seconds(timeout)}s")
                    if conn is None:
                        await asyncio.sleep(min(poll, left))
                    else:
                        await _wait_notified(conn, str(job_id), min(poll, left))
            except BaseException:
                if registered:
                    with contextlib.suppress(Exception):
                        await asyncio.shield(self._run(_sql.stop_awaiting(job_id, self.worker_id)))
                raise

    async def snooze(self, job_id: int, attempt: int, delay: Duration) -> Job:
        return await self._run(_sql.snooze(job_id, attempt, delay, self.now()))

    async def reap(self, limit: int | None = None) -> int:
        return await self._run(_sql.reap(limit, self.now()))

    async def rotate(self, worker: str | None = None) -> int:
        return await self._run(_sql.rotate(self.now(), worker))

    async def fire_schedules(self, limit: int | None = None) -> list[ScheduleFire]:
        return await self._run(_sql.fire_schedules(limit, self.now()))

    async def queue_state(self, queue: str) -> QueueState:
        return await self._run(_sql.queue_state(queue, self.now()))

    async def wait_for_jobs(self, queue: str, ttl: Duration = 60) -> dt.datetime:
        return await self._run(_sql.wait_for_jobs(queue, self.worker_id, ttl))

    async def next_work(self, queues: Sequence[str], *, register: bool = False, ttl: Duration = 30) -> list[tuple[str, str, bool]]:
        """As Client.next_work."""
        return await self._run(_sql.next_work(queues, self.worker_id if register else None, ttl if register else None, self.now()))

    async def stop_waiting(self, queue: str) -> bool:
        return await self._run(_sql.stop_waiting(queue, self.worker_id))

    async def cancel(self, job_id: int, reason: str | None = None) -> Job:
        return await self._run(_sql.cancel(job_id, reason, self.now()))

    async def replay(self, job_id: int) -> Job:
        return await self._run(_sql.replay(job_id, self.now()))

    async def replay_dead_letters(self, queue: str) -> list[ReplayOutcome]:
        return await self._run(_sql.replay_dead_letters(queue, self.now()))

    async def list_jobs(
        self,
        queue: str | None = None,
        *,
        statuses: Sequence[str] | None = None,
        dead_letter_reason: str | None = None,
        order: str = "oldest",
        after_id: int | None = None,
        after_completed_at: dt.datetime | None = None,
        limit: int = 100,
        payloads: bool = True,
    ) -> list[Job]:
        """One keyset page of jobs (``backoff.list_jobs``): the next page passes
        the last job's id as ``after_id`` (and its ``completed_at`` as
        ``after_completed_at`` for the order ``finished``). Admin only."""
        return await self._run(
            _sql.list_jobs(queue, statuses, dead_letter_reason, order, after_id, after_completed_at, limit, payloads)
        )

    async def job_detail(self, job_id: int) -> JobDetail | None:
        """A job with its effective policy (``backoff.job_detail``); None when
        there is no such job. Admin only."""
        return await self._run(_sql.job_detail(job_id))

    async def dead_letter_groups(self, queue: str | None = None, limit: int = 200) -> list[DeadLetterGroup]:
        """Dead letters grouped by queue, reason and error signature, largest
        first (``backoff.dead_letter_groups``). Admin only."""
        return await self._run(_sql.dead_letter_groups(queue, limit))

    async def stats(self, window: Duration | None = None) -> list[QueueStats]:
        return await self._run(_sql.stats(window, self.now()))

    async def prune(self, older_than: Duration, limit: int | None = None) -> int:
        return await self._run(_sql.prune(older_than, limit, self.now()))

    async def pause_queue(self, queue: str) -> bool:
        return await self._run(_sql.pause_queue(queue))

    async def resume_queue(self, queue: str) -> bool:
        return await self._run(_sql.resume_queue(queue))


@contextlib.asynccontextmanager
async def _listening(pool: AsyncConnectionPool) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
    """client._listening, awaited."""
    async with pool.connection() as conn:
        was = conn.autocommit
        await conn.set_autocommit(True)
        await conn.execute(f"LISTEN {_sql.FINISHED_CHANNEL}")
        try:
            yield conn
        finally:
            try:
                await conn.execute(f"UNLISTEN {_sql.FINISHED_CHANNEL}")
                await conn.set_autocommit(was)
            except psycopg.Error:
                await conn.close()


async def _wait_notified(conn: psycopg.AsyncConnection[Any], job_id: str, timeout: float) -> bool:
    """Wait up to timeout seconds for a notification of the job on conn
    (a reader on its socket, as notifies() has no timeout here); whether
    one came."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    readable = asyncio.Event()
    loop.add_reader(conn.fileno(), readable.set)
    try:
        while (left := deadline - loop.time()) > 0:
            try:
                await asyncio.wait_for(readable.wait(), left)
            except asyncio.TimeoutError:
                return False
            readable.clear()
            conn.pgconn.consume_input()
            found = False
            while (n := conn.pgconn.notifies()) is not None:
                found = found or n.extra.decode() == job_id
            if found:
                return True
        return False
    finally:
        loop.remove_reader(conn.fileno())


async def _fetch(conn: psycopg.AsyncConnection[Any], call: _sql.Call[Any]) -> _sql.Rows:
    async with conn.cursor(row_factory=tuple_row) as cur:
        await cur.execute(call.sql, call.params)
        return await cur.fetchall()


async def _other_default_level(conn: psycopg.AsyncConnection[Any]) -> bool:
    """client.other_default_level, awaited."""
    async with _autocommit(conn):
        row = await (await conn.execute(READ_DEFAULT_LEVEL)).fetchone()
    return row is not None and row[0] != "read committed"


@contextlib.asynccontextmanager
async def _autocommit(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[None]:
    """client.autocommit, awaited."""
    if conn.autocommit:
        yield
        return
    await conn.set_autocommit(True)
    try:
        yield
    finally:
        if conn.info.transaction_status == TransactionStatus.IDLE:
            await conn.set_autocommit(False)


async def _fetch_read_committed(conn: psycopg.AsyncConnection[Any], call: _sql.Call[Any]) -> _sql.Rows:
    """client._fetch_read_committed, awaited: BEGIN, the statement and
    COMMIT in one pipeline; a failure rolls back."""
    async with _autocommit(conn):
        cur = conn.cursor(row_factory=tuple_row)
        try:
            if psycopg.AsyncPipeline.is_supported():
                await _pipelined(conn, cur, call)
            else:
                await _begin_call_commit(conn, cur, call)
            return await cur.fetchall()
        except BaseException:
            if not conn.closed and conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
                with contextlib.suppress(psycopg.Error):
                    await conn.execute("ROLLBACK")
            raise
        finally:
            await cur.close()


async def _pipelined(conn: psycopg.AsyncConnection[Any], cur: psycopg.AsyncCursor[Any], call: _sql.Call[Any]) -> None:
    """BEGIN, the statement and COMMIT in one pipeline. A task cancelled
    while the pipeline waits for them leaves it busy, and closing it raises
    an OperationalError in place of the cancellation, which the task's
    owner must see (the AsyncWorker stops its loops by cancelling them):
    the cancellation is raised, and the pool discards the connection."""
    try:
        async with conn.pipeline():
            await _begin_call_commit(conn, cur, call)
    except psycopg.Error as e:
        if isinstance(e.__context__, asyncio.CancelledError):
            raise e.__context__ from None
        raise


async def _begin_call_commit(conn: psycopg.AsyncConnection[Any], cur: psycopg.AsyncCursor[Any], call: _sql.Call[Any]) -> None:
    await conn.execute(BEGIN_READ_COMMITTED)
    await cur.execute(call.sql, call.params)
    await conn.execute("COMMIT")


async def retry_transient(call: Callable[[], Awaitable[T]]) -> T:
    """worker.retry_transient, awaited."""
    wait = 0.1
    for attempt in range(1, SETTLE_TRIES + 1):
        try:
            return await call()
        except Exception as e:
            if attempt == SETTLE_TRIES or not transient(e):
                raise
            log.warning("settle call failed; retrying in %.1fs: %s", wait, e)
        await asyncio.sleep(wait)
        wait *= 2
    raise AssertionError("unreachable")


class _Signals:
    def __init__(self) -> None:
        self._event = asyncio.Event()
        self._pending: set[str] = set()

    def send(self, kind: str) -> None:
        self._pending.add(kind)
        self._event.set()

    def take(self, kind: str) -> bool:
        had = kind in self._pending
        self._pending.discard(kind)
        return had

    async def wait(self, timeout: float) -> set[str]:
        if not self._pending:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), timeout)
        self._event.clear()
        got, self._pending = self._pending, set()
        return got


class _Attempt:
    def __init__(self, job: Job, queue: Queue) -> None:
        self.job = job
        self.queue = queue
        self.ctx = Context()
        self.task: asyncio.Task[None] | None = None

    def cancel(self, cause: LeaseLost | LeaseExpired | WorkerShutdown) -> None:
        if self.ctx.cancel(cause) and self.task is not None:
            self.task.cancel()


class _Producer:
    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.pacer = _pacing.Pacer(queue.batch_size or queue.concurrency)
        self.signals = _Signals()
        self.inflight = 0
        #: Drained and waiting for the worker's look (read by the look).
        self.parked = False


class AsyncWorker:
    """The Worker, on asyncio: handlers are coroutines ``async def
    handler(job, ctx)``; each attempt runs in a task of its own with a
    heartbeat task beside it. A handler asked to stop (lease lost or
    expired, the end of the shutdown's grace period) is cancelled; a
    handler that catches the CancelledError and goes on keeps its job, its
    lease extended, and run() waits for it (docs/adr/0028).

    ::

        worker = AsyncWorker(pool, [Queue("emails", send_email)])
        await worker.run()  # until worker.stop(), or the task is cancelled

    ``direct_shards=True``: as :class:`pgbackoff.Worker`, the pool is a
    router's and claims and settling calls go straight to the shards.
    """

    def __init__(
        self,
        pool: AsyncConnectionPool,
        queues: Sequence[Queue],
        *,
        poll_interval: Duration = 1.0,
        reap_interval: Duration | None = 5.0,
        schedule_interval: Duration | None = 1.0,
        shutdown_timeout: Duration = 30.0,
        listen: bool = True,
        worker_id: str | None = None,
        now: Clock | None = None,
        direct_shards: bool = False,
    ) -> None:
        self.settings = Settings.of(queues, poll_interval, reap_interval, shutdown_timeout, listen, schedule_interval)
        self.settings.check_pool(pool.max_size)
        self.pool = pool
        self.client = AsyncClient(pool, worker_id=worker_id, now=now)
        self.direct_shards = direct_shards
        #: Direct mode: the shards' pools, and a client on each.
        self._shards: AsyncShards | None = None
        self._shard_clients: dict[int, AsyncClient] = {}
        self._listen_epoch = 0
        self._relisten = asyncio.Event()
        self.producers = [_Producer(q) for q in self.settings.queues]
        self._stopping = asyncio.Event()
        self._attempts: dict[int, _Attempt] = {}
        self._handlers: set[asyncio.Task[None]] = set()
        self._completions: list[Completion] = []
        self._completed = asyncio.Event()
        self._completer_stopped = False
        self._listening = False
        self._registered: dict[str, float] = {}
        #: As Worker: producers may park while the look runs.
        self._look_on = self.settings.maintains
        self._look_failed = False
        self._claims = 0

    @property
    def worker_id(self) -> str:
        return self.client.worker_id

    @property
    def listening(self) -> bool:
        return self._listening

    def stop(self) -> None:
        """Start the graceful shutdown (from the worker's event loop)."""
        self._stopping.set()
        for p in self.producers:
            p.signals.send(_pacing.WAKE)

    async def run(self) -> None:
        """As Worker.run; cancelling the task that awaits it also starts
        the graceful shutdown, and the CancelledError is raised after it."""
        await self.client.check_schema()
        if self.direct_shards:
            shards = AsyncShards(self.pool, self.settings.connections_needed(), [q.name for q in self.settings.queues])
            try:
                layout = await shards.open()
            except BaseException:
                await shards.close()
                raise
            self._shards = shards
            log.info("direct to the shards (router layout version %d): %s", layout.version, self._where())
        background = [asyncio.create_task(self._complete_loop())]
        if self.settings.listen:
            background.append(asyncio.create_task(self._listen_loop()))
        if self.settings.maintains:
            background.append(asyncio.create_task(self._maintain_loop()))
        producing = [asyncio.create_task(self._produce(p)) for p in self.producers]
        log.info("worker %s started: queues %s", self.worker_id, ", ".join(q.name for q in self.settings.queues))
        cancelled = False
        try:
            await self._stopping.wait()
        except asyncio.CancelledError:
            cancelled = True
            self.stop()
        await asyncio.gather(*producing, return_exceptions=True)
        await self._shutdown()
        for queue in list(self._registered):
            await self._set_waiting(queue, False)
        self._completer_stopped = True
        self._completed.set()
        # The listen and maintenance loops end when cancelled; cancelled
        # again while one is left: a cancellation can be lost in a call
        # that completes as it arrives (asyncio.wait_for in Python before
        # 3.12, a driver's own handling), and the loop then goes on.
        loops = set(background[1:])
        while loops:
            for t in loops:
                t.cancel()
            _, loops = await asyncio.wait(loops, timeout=1)
        await asyncio.gather(*background, return_exceptions=True)
        if self._shards is not None:
            await self._shards.close()
        log.info("worker %s stopped", self.worker_id)
        if cancelled:
            raise asyncio.CancelledError()

    # --- direct mode ---

    async def _on_shard(self, shard: int) -> AsyncClient:
        c = self._shard_clients.get(shard)
        if c is None:
            assert self._shards is not None
            pool = await self._shards.pool(shard)
            c = self._shard_clients.setdefault(shard, self.client.using(pool))
        return c

    async def _for_queue(self, queue: str) -> AsyncClient:
        """Where queue's claims go: its shard in direct mode, else the pool."""
        if self._shards is None:
            return self.client
        return await self._on_shard(self._shards.queue_shard(queue))

    async def _for_job(self, job_id: int) -> AsyncClient:
        """Where a job's settling calls go: its id's shard in direct mode."""
        if self._shards is None:
            return self.client
        return await self._on_shard(job_shard(job_id))

    def _where(self) -> str:
        assert self._shards is not None
        return ", ".join(f"{q.name} on shard {self._shards.queue_shard(q.name)}" for q in self.settings.queues)

    async def _by_shard(self, items: Sequence[Row]) -> list[tuple[AsyncClient, list[Row]]]:
        """Settling items (job id first) with the client of their job's
        shard in direct mode, else all with the pool's."""
        if self._shards is None:
            return [(self.client, list(items))]
        return [(await self._on_shard(k), part) for k, part in split_by_shard(items, lambda it: int(it[0])).items()]

    async def _follow(self, tick: bool = False) -> None:
        """As Worker._follow."""
        if self._shards is None:
            return
        try:
            changed = await self._shards.follow(tick)
        except Exception as e:
            log.warning("read the router's layout failed; claims stay where they went: %s", e)
            return
        if changed:
            log.info("the router's layout changed: %s", self._where())
            self._registered.clear()
            self._listen_epoch += 1
            self._relisten.set()
            self._wake_all()

    # --- producers ---

    async def _produce(self, p: _Producer) -> None:
        pacer = p.pacer
        poll = _pacing.Poll(self.settings.poll_interval)
        while not self._stopping.is_set():
            want = pacer.want(p.queue.concurrency - p.inflight, self.client.now())
            if want:
                step = await self._look(p, want)
                if step is not None:
                    if step.unregister:
                        await self._set_waiting(p.queue.name, False)
                    if step.register:
                        await self._set_waiting(p.queue.name, True)
                    if step.again:
                        continue
            # A drained queue leaves its poll to the worker's look, which
            # wakes it when a job comes due and renews its registration.
            parked = pacer.parked(self._look_on)
            p.parked = parked
            signals = await p.signals.wait(3600.0 if parked else pacer.timeout(poll.until()))
            p.parked = False
            if not parked and poll.tick(signals) and pacer.idle:
                await self._refresh(p.queue.name)
            pacer.signalled(signals)

    async def _look(self, p: _Producer, want: int) -> _pacing.Step | None:
        try:
            # Shielded: a claim committed but never read would leave its
            # jobs running until the reaper.
            client = await self._for_queue(p.queue.name)
            jobs = await asyncio.shield(client.claim(p.queue.name, want, lease=p.queue.lease))
        except Exception as e:
            log.error("claim jobs in %r failed: %s", p.queue.name, e)
            p.pacer.failed()
            await self._follow()
            return None
        if len(jobs) < want:
            # A queue that moved gives no claims on its old shard.
            await self._follow()
        for job in jobs:
            self._start(p, job)
        if jobs:
            self._claims += 1
            return p.pacer.found(len(jobs), want, woken=p.signals.take(_pacing.WAKE))
        read_mono, read_clock = time.monotonic(), self.client.now()
        state: QueueState | None = None
        try:
            state = await self.client.queue_state(p.queue.name)
        except Exception as e:
            log.debug("read state of %r failed; the queue is treated as idle: %s", p.queue.name, e)
        return p.pacer.found_none(state, self.listening, read_mono, read_clock)

    async def _set_waiting(self, queue: str, waiting: bool) -> None:
        try:
            if waiting:
                await self.client.wait_for_jobs(queue, ttl=self.settings.registration_ttl())
                self._registered[queue] = time.monotonic()
            else:
                await self.client.stop_waiting(queue)
                self._registered.pop(queue, None)
        except Exception as e:
            log.warning("could not record whether the worker waits for %r; polling covers it: %s", queue, e)

    async def _refresh(self, queue: str) -> None:
        at = self._registered.get(queue)
        if self.listening and (at is None or time.monotonic() - at > self.settings.registration_ttl() / 3):
            await self._set_waiting(queue, True)

    def _wake_all(self) -> None:
        for p in self.producers:
            p.signals.send(_pacing.WAKE)

    # --- handlers ---

    def _start(self, p: _Producer, job: Job) -> None:
        a = _Attempt(job, p.queue)
        self._attempts[job.id] = a
        p.inflight += 1
        task = asyncio.create_task(self._run_attempt(p, a))
        self._handlers.add(task)
        task.add_done_callback(self._handlers.discard)

    async def _run_attempt(self, p: _Producer, a: _Attempt) -> None:
        lease, every = self.settings.lease_and_beat(p.queue, a.job, self.client.now())
        loop = asyncio.get_running_loop()
        watchdog = loop.call_later(lease, a.cancel, LeaseExpired("lease expired"))
        beats = asyncio.create_task(self._heartbeat(a, every, watchdog)) if every is not None else None
        try:
            exc: BaseException | None = None
            a.task = asyncio.create_task(p.queue.handler(a.job, a.ctx))
            try:
                await asyncio.shield(a.task)
            except asyncio.CancelledError as e:
                if a.ctx.cause is None:
                    a.task.cancel()  # the worker's own task was cancelled: not ours to decide
                    raise
                exc = a.ctx.cause if a.task.cancelled() else e
            except Exception as e:
                exc = e
            watchdog.cancel()
            if beats is not None:
                beats.cancel()
                await asyncio.gather(beats, return_exceptions=True)
            if (o := attempt_outcome(a.job, exc, a.ctx.cause, a.ctx.output)) is not None:
                await self._settle(a.job, o)
        except Exception:
            log.exception("job %d: recording its outcome failed; the reaper will retry it", a.job.id)
        finally:
            watchdog.cancel()
            if beats is not None:
                beats.cancel()
            self._attempts.pop(a.job.id, None)
            p.inflight -= 1
            p.signals.send(_pacing.FREED)

    async def _heartbeat(self, a: _Attempt, every: float, watchdog: asyncio.TimerHandle) -> None:
        """Extend the lease every interval until the handler returns, also
        after a shutdown cancelled it (it still holds the job)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(every)
            try:
                c = await self._for_job(a.job.id)
                if (progress := a.ctx.take_progress()) is not None:
                    until = await c.heartbeat_progress(a.job.id, a.job.attempt, RawJSON(progress), extend=a.queue.lease)
                else:
                    until = await c.heartbeat(a.job.id, a.job.attempt, extend=a.queue.lease)
            except Exception as e:
                if is_lost(e):
                    log.warning("job %d attempt %d: lease lost; cancelling the handler: %s", a.job.id, a.job.attempt, e)
                    a.cancel(LeaseLost(str(e)))
                    return
                log.error("heartbeat of job %d failed; will retry: %s", a.job.id, e)
                continue
            left = lease_left(until, self.client.now())
            if left > 0:
                watchdog.cancel()
                watchdog = loop.call_later(left, a.cancel, LeaseExpired("lease expired"))

    async def _settle(self, job: Job, o: Outcome) -> None:
        if o.kind == "completed" and batched(o) and not self._completer_stopped:
            self._completions.append((job.id, job.attempt, job.queue, o.output))
            self._completed.set()
            return
        try:
            c = await self._for_job(job.id)
            if o.kind == "completed":
                try:
                    await self._complete_one(job, o.output)
                except InvalidArgument as e:
                    if o.output is None:
                        raise
                    refused = Outcome("permanent", output_refused(e))
                    failed(job, refused, await retry_transient(lambda: c.fail(job.id, job.attempt, refused.error, retryable=False)))
            elif o.kind == "snoozed":
                await retry_transient(lambda: c.snooze(job.id, job.attempt, snooze_delay(o)))
            else:
                retryable = o.kind != "permanent"
                failed(job, o, await retry_transient(lambda: c.fail(job.id, job.attempt, o.error, retry_in=o.delay, retryable=retryable)))
        except Exception as e:
            not_recorded(job, o, e)

    async def _complete_one(self, job: Job, output: str | None = None) -> None:
        """Worker._complete_one, awaited."""
        calls = 0
        c = await self._for_job(job.id)

        def call() -> Awaitable[Job]:
            nonlocal calls
            calls += 1
            if output is not None:
                return c.complete_with_output(job.id, job.attempt, RawJSON(output))
            return c.complete(job.id, job.attempt)

        try:
            await retry_transient(call)
        except Exception as e:
            if not is_lost(e) or calls == 1 or not await self._confirm([(job.id, job.attempt)]):
                raise

    async def _confirm(self, refused: Sequence[tuple[int, int]]) -> set[int]:
        """Worker._confirm, awaited: those refused completions that an
        earlier call, whose reply was lost, made."""
        try:
            done: set[int] = set()
            for c, part in await self._by_shard(refused):
                done |= set(await c.completed_by(*ids_and_attempts(part)))
            return confirmed(done)
        except Exception as e:
            return confirm_failed(refused, e)

    async def _shutdown(self) -> None:
        if self._handlers:
            await asyncio.wait(set(self._handlers), timeout=self.settings.shutdown_timeout)
        left = list(self._attempts.values())
        if left:
            log.warning("shutdown timeout: cancelling %d running handlers", len(left))
            for a in left:
                a.cancel(WorkerShutdown("worker shutdown"))
        while self._handlers:
            _, pending = await asyncio.wait(set(self._handlers), timeout=10.0)
            if pending:
                log.error(
                    "handlers ignore their cancellation; jobs %s stay leased to this worker until they return",
                    sorted(self._attempts),
                )

    # --- completer, listener, reaper ---

    async def _complete_loop(self) -> None:
        while True:
            await self._completed.wait()
            self._completed.clear()
            while self._completions:
                batch = self._completions[:MAX_COMPLETE_BATCH]
                del self._completions[:MAX_COMPLETE_BATCH]
                await self._flush(batch)
            if self._completer_stopped and not self._completions:
                return

    async def _flush(self, batch: list[Completion]) -> None:
        """One complete_many per shard in direct mode, else one."""
        try:
            parts = await self._by_shard(batch)
        except Exception as e:
            log.error("could not record %d completions; the reaper will retry the jobs: %s", len(batch), e)
            return
        for client, part in parts:
            await self._flush_on(client, part)

    async def _flush_on(self, client: AsyncClient, batch: list[Completion]) -> None:
        calls = 0

        def call() -> Awaitable[list[int]]:
            nonlocal calls
            calls += 1
            if (outputs := _raw(batch_outputs(batch))) is not None:
                return client.complete_many(*ids_and_attempts(batch), outputs)
            return client.complete_many(*ids_and_attempts(batch))

        try:
            done = set(await retry_transient(call))
        except Exception as e:
            log.error("could not record %d completions; the reaper will retry the jobs: %s", len(batch), e)
            return
        if calls > 1 and len(done) < len(batch):
            done |= await self._confirm(refusals(batch, done))
        queues = settled_queues(batch, done)
        for p in self.producers:
            if p.queue.name in queues:
                p.signals.send(_pacing.SETTLED)

    async def _listen_loop(self) -> None:
        retry = 0.1
        while True:
            try:
                epoch = self._listen_epoch
                await self._listen_once()
                if epoch != self._listen_epoch:
                    retry = 0.1
                    continue
            except Exception as e:
                log.warning("listen failed; polling until it reconnects in %.1fs: %s", retry, e)
            finally:
                self._listening = False
            await asyncio.sleep(retry)
            retry = min(retry * 2, 30.0)

    async def _listen_once(self) -> None:
        """LISTEN on the pool's database, or in direct mode on each shard
        of the served queues; a layout change ends it (Worker._listen_once)."""
        self._relisten.clear()
        where = [(self.pool.conninfo, dict(self.pool.kwargs))]
        if self._shards is not None:
            where = [shard_params(self.pool.conninfo, self.pool.kwargs, a) for a in self._shards.served().values()]
        conns: list[psycopg.AsyncConnection[Any]] = []
        tasks: list[asyncio.Task[None]] = []
        try:
            for conninfo, kw in where:
                kwargs: dict[str, Any] = {**kw, "autocommit": True}
                conns.append(await psycopg.AsyncConnection.connect(conninfo, **kwargs))
                await conns[-1].execute(f"LISTEN {_sql.NOTIFY_CHANNEL}")
            self._listening = True
            self._wake_all()
            by_queue = {p.queue.name: p for p in self.producers}

            async def hear(conn: psycopg.AsyncConnection[Any]) -> None:
                async for n in conn.notifies():
                    if n.payload in by_queue:
                        by_queue[n.payload].signals.send(_pacing.WAKE)
                    elif not n.payload:
                        self._wake_all()

            tasks = [asyncio.create_task(hear(c)) for c in conns]
            tasks.append(asyncio.create_task(self._wait_relisten()))
            done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                t.result()
        finally:
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for c in conns:
                await c.close()

    async def _wait_relisten(self) -> None:
        await self._relisten.wait()

    async def _maintain_loop(self) -> None:
        """As Worker._maintain_loop: fire due schedules at start, then the
        idle queues' look every poll interval, reap and rotate at
        reap_interval while jobs flow, all three every IDLE_MAINTENANCE
        idle; one call at a time."""
        loop = asyncio.get_running_loop()
        s = self.settings
        m = _pacing.Maintenance(s.reap_interval, s.schedule_interval, loop.time(), s.look_every() if self._look_on else None)
        claims = self._claims
        while True:
            await asyncio.sleep(max(0.0, m.due() - loop.time()))
            await self._follow(tick=True)
            now = loop.time()
            if m.fire_due(now):
                await self._fire_schedules()
                m.fired(loop.time())
            if m.next_reap is not None and now >= m.next_reap:
                busy = self._claims != claims or any(p.inflight for p in self.producers)
                claims = self._claims
                if m.reap_due(now, busy):
                    await self._reap()
                    m.reaped(loop.time())
                    m.full(loop.time())
            if m.look_due(now):
                await self._look_and_do(m)
                m.looked(loop.time())
                if m.full_due(now):
                    if s.reap_interval:
                        await self._reap()
                    if s.schedule_interval is not None:
                        await self._fire_schedules()
                    m.full(loop.time())

    async def _look_and_do(self, m: _pacing.Maintenance) -> None:
        """As Worker._look_and_do."""
        s = self.settings
        parked = [p.queue.name for p in self.producers if p.parked]
        try:
            rows = await self.client.next_work(parked, register=self.listening, ttl=s.registration_ttl())
        except Exception as e:
            if getattr(e, "sqlstate", None) == "42883":
                log.info("the schema has no backoff.next_work: idle queues poll on their own (migrate to version 5)")
                m.look_off()
                self._look_on = False
                self._wake_all()
                return
            (log.debug if self._look_failed else log.error)(
                "look for work failed; idle queues claim and schedules fire at every look until it works: %s", e
            )
            self._look_failed = True
            m.look_ok = False
            self._wake_all()
            return
        self._look_failed = False
        m.look_ok = True
        found = _pacing.Found.of(rows)
        for p in self.producers:
            if p.queue.name in found.queues:
                p.signals.send(_pacing.WAKE)
        if found.fire and s.schedule_interval is not None:
            await self._fire_schedules()
        if s.reap_interval:
            if found.reap:
                await self._reap_leases()
            if found.rotate:
                await self._rotate()

    async def _reap(self) -> None:
        await self._reap_leases()
        # The live jobs' segments, beside reap (docs/adr/0061).
        await self._rotate()

    async def _reap_leases(self) -> None:
        try:
            if reaped(await self.client.reap()):
                self._wake_all()
        except Exception as e:
            log.error("reap failed: %s", e)

    async def _rotate(self) -> None:
        try:
            await self.client.rotate(worker=self.client.worker_id)
        except Exception as e:
            log.error("rotate failed: %s", e)

    async def _fire_schedules(self) -> None:
        try:
            if fired(await self.client.fire_schedules()):
                self._wake_all()
        except Exception as e:
            log.warning("fire schedules failed: %s", e)
