"""The threaded Worker: claims jobs of several queues and runs their
handlers in threads, as the Go client's Worker does (docs/adr/0026).

Parts, one thread each, sharing one pool: a producer per queue (claims
into free handler slots, paced by :mod:`pgbackoff._pacing`), handler
threads per queue (its concurrency), the heartbeater (extends the leases of
running attempts), the completer (completions of every queue batched into
``backoff.complete_many``), the listener (one LISTEN connection of its
own) and the reaper (``backoff.reap`` for crashed workers' leases, then
``backoff.rotate`` for the live jobs' segments).
"""

from __future__ import annotations

import datetime as dt
import logging
import queue as _queue
import select
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import psycopg
from psycopg_pool import ConnectionPool

from . import _pacing
from ._outcome import Context, Outcome
from ._settling import Completion, attempt_outcome, batch_outputs, batched, output_refused, confirm_failed, confirmed, failed, fired, ids_and_attempts, is_lost, lease_left, not_recorded, reaped, refusals, settled_queues, snooze_delay
from ._sql import NOTIFY_CHANNEL
from .sharding import Shards, job_shard, shard_params, split_by_shard
from .client import Client, Clock
from .errors import InvalidArgument, LeaseExpired, LeaseLost, WorkerShutdown, transient
from .types import Duration, Job, QueueState, as_seconds
from .workflows import RawJSON

log = logging.getLogger("pgbackoff")
T = TypeVar("T")
#: A settling item: a job id first.
Row = TypeVar("Row", bound=tuple[Any, ...])

#: A handler runs one attempt of a job. Returning completes the job; an
#: exception fails it (see pgbackoff.errors: Permanent, RetryAfter,
#: Snooze). ctx says when to stop (lease lost, shutdown).
Handler = Callable[[Job, Context], None]

#: A batch of completions is at most this long.
MAX_COMPLETE_BATCH = 5000
#: Settle calls that fail on the connection are sent again this many
#: times in all, 100 ms doubling: about 3 s for the database to come back.
SETTLE_TRIES = 6


@dataclass(frozen=True)
class Queue:
    """One queue a worker serves: its handler and how many of its jobs run
    at once. Only name and handler are required."""

    name: str
    handler: Any  # Handler for Worker, AsyncHandler for AsyncWorker
    #: Handlers of this queue running at once.
    concurrency: int = 10
    #: At most this many jobs per claim (None: concurrency).
    batch_size: int | None = None
    #: The lease each claim and heartbeat asks for (None: the policy's).
    lease: Duration | None = None
    #: How often a running attempt's lease is extended (None: a third of
    #: the lease; negative: never, and the lease is the handler's deadline).
    heartbeat_interval: Duration | None = None

    def checked(self) -> Queue:
        if not self.name:
            raise InvalidArgument("new worker", "empty queue name")
        if self.handler is None:
            raise InvalidArgument(f"new worker for {self.name!r}", "no handler")
        if self.concurrency < 1:
            raise InvalidArgument(f"new worker for {self.name!r}", f"concurrency {self.concurrency} is below 1")
        lease = None if self.lease is None else as_seconds(self.lease)
        if lease is not None and lease <= 0:
            raise InvalidArgument(f"new worker for {self.name!r}", f"lease {self.lease} is not positive")
        beat = None if self.heartbeat_interval is None else as_seconds(self.heartbeat_interval)
        if lease is not None and beat is not None and beat >= lease:
            raise InvalidArgument(
                f"new worker for {self.name!r}",
                f"heartbeat interval {self.heartbeat_interval} must be shorter than the lease {self.lease}",
            )
        return self


@dataclass
class Settings:
    """What the threaded and the asyncio worker share, checked."""

    queues: list[Queue]
    poll_interval: float
    reap_interval: float | None
    shutdown_timeout: float
    listen: bool
    #: How often due schedules are fired (None: never).
    schedule_interval: float | None = None

    @staticmethod
    def of(
        queues: Sequence[Queue],
        poll_interval: Duration,
        reap_interval: Duration | None,
        shutdown_timeout: Duration,
        listen: bool,
        schedule_interval: Duration | None = None,
    ) -> Settings:
        if not queues:
            raise InvalidArgument("new worker", "no queue")
        names = [q.name for q in queues]
        for n in names:
            if names.count(n) > 1:
                raise InvalidArgument("new worker", f"queue {n!r} given twice")
        if as_seconds(poll_interval) <= 0:
            raise InvalidArgument("new worker", f"poll interval {poll_interval} is not positive")
        return Settings(
            queues=[q.checked() for q in queues],
            poll_interval=as_seconds(poll_interval),
            reap_interval=None if reap_interval is None else as_seconds(reap_interval),
            shutdown_timeout=as_seconds(shutdown_timeout),
            listen=listen,
            schedule_interval=(
                None if schedule_interval is None or as_seconds(schedule_interval) <= 0 else as_seconds(schedule_interval)
            ),
        )

    @property
    def maintains(self) -> bool:
        """Whether the worker runs the maintenance loop (reap, rotate, fire
        schedules)."""
        return bool(self.reap_interval) or self.schedule_interval is not None

    def connections_needed(self) -> int:
        """One claim per queue, the completer, the heartbeater and the
        maintenance loop (reap, rotate, fire schedules, one call at a time);
        settle calls share them. LISTEN takes one more, outside the pool."""
        return len(self.queues) + 2 + (1 if self.maintains else 0)

    def check_pool(self, max_size: int) -> None:
        """Refuse a pool too small for connections_needed."""
        need = self.connections_needed()
        if max_size < need:
            raise InvalidArgument(
                "new worker",
                f"the pool allows {max_size} connections, this worker needs at least {need}: raise max_size",
            )

    def look_every(self) -> float:
        """The idle queues' look (docs/adr/0083): poll_interval bounds how
        late a job starts, schedule_interval how late a slot fires,
        reap_interval how late an expired lease is reaped."""
        return min(e for e in (self.poll_interval, self.schedule_interval, self.reap_interval) if e is not None and e > 0)

    def registration_ttl(self) -> float:
        """How long a registration lasts: an idle producer renews it at a
        poll tick long before, and one left by a dead worker costs at most
        this long of needless notifications."""
        return max(30.0, 3 * self.poll_interval)

    def lease_and_beat(self, q: Queue, job: Job, clock: dt.datetime | None) -> tuple[float, float | None]:
        """The attempt's lease in seconds (from its lease_until) and how
        often to extend it (None: never)."""
        lease = 0.0
        if job.lease_until is not None:
            lease = (job.lease_until - (clock or dt.datetime.now(dt.timezone.utc))).total_seconds()
        if lease <= 0:
            lease = as_seconds(q.lease) if q.lease is not None else 30.0
        if q.heartbeat_interval is not None and as_seconds(q.heartbeat_interval) < 0:
            return lease, None
        every = as_seconds(q.heartbeat_interval) if q.heartbeat_interval is not None else 0.0
        if every <= 0 or every >= lease:
            # The policy's lease is known only now: a beat not shorter than
            # it would let the lease lapse between beats.
            every = lease / 3
        return lease, every


def _raw(outputs: list[str | None] | None) -> list[RawJSON | None] | None:
    """A batch's outputs (JSON texts) as complete_many sends them as they are."""
    return None if outputs is None else [None if o is None else RawJSON(o) for o in outputs]


def retry_transient(call: Callable[[], T], stopping: threading.Event | None = None) -> T:
    """Run a settle call, again while it fails on the connection (see
    errors.transient): fenced by the attempt, a repeat takes effect once or
    is refused, and never lands on a later claim. Without it a blip would
    leave the job running until the reaper counts it as a crash."""
    wait = 0.1
    for attempt in range(1, SETTLE_TRIES + 1):
        try:
            return call()
        except Exception as e:
            if attempt == SETTLE_TRIES or not transient(e):
                raise
            log.warning("settle call failed; retrying in %.1fs: %s", wait, e)
        time.sleep(wait)
        wait *= 2
    raise AssertionError("unreachable")


class _Signals:
    """A producer's pending signals (see _pacing), and a wait for them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._pending: set[str] = set()

    def send(self, kind: str) -> None:
        with self._cond:
            self._pending.add(kind)
            self._cond.notify_all()

    def take(self, kind: str) -> bool:
        with self._cond:
            had = kind in self._pending
            self._pending.discard(kind)
            return had

    def wait(self, timeout: float, stopping: threading.Event) -> set[str]:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._pending) or stopping.is_set(), timeout)
            got, self._pending = self._pending, set()
            return got


class _Attempt:
    def __init__(self, job: Job, queue: Queue, lease: float, every: float | None) -> None:
        self.job = job
        self.queue = queue
        self.ctx = Context()
        self.every = every
        now = time.monotonic()
        self.deadline = now + lease  # the watchdog: the lease as last extended
        self.next_beat = now + every if every is not None else None


class _HandlerThreads:
    """A queue's handler threads, as many as its concurrency, each taking
    the next attempt from one SimpleQueue. Not a ThreadPoolExecutor: its
    Future (a Condition and a lock) per job and its lazy thread starts were
    a good part of a no-op job's cost on the claiming thread."""

    def __init__(self, n: int, name: str) -> None:
        self._todo: _queue.SimpleQueue[tuple[Callable[..., None], tuple[Any, ...]] | None] = _queue.SimpleQueue()
        self._threads = [threading.Thread(target=self._loop, name=f"{name}_{i}", daemon=True) for i in range(n)]
        self._started = False

    def start(self) -> None:
        self._started = True
        for t in self._threads:
            t.start()

    def submit(self, fn: Callable[..., None], *args: Any) -> None:
        self._todo.put((fn, args))

    def shutdown(self) -> None:
        """Let each thread finish what it was given, then end it."""
        if not self._started:
            return
        for _ in self._threads:
            self._todo.put(None)
        for t in self._threads:
            t.join()
        self._started = False

    def _loop(self) -> None:
        while (item := self._todo.get()) is not None:
            fn, args = item
            try:
                fn(*args)
            except BaseException:
                log.exception("handler thread: unexpected error")


class _Producer:
    def __init__(self, queue: Queue, handlers: _HandlerThreads) -> None:
        self.queue = queue
        self.pacer = _pacing.Pacer(queue.batch_size or queue.concurrency)
        self.signals = _Signals()
        self.handlers = handlers
        self.inflight = 0
        self.lock = threading.Lock()
        #: Drained and waiting for the worker's look (read by the look).
        self.parked = False

    def free(self) -> int:
        with self.lock:
            return self.queue.concurrency - self.inflight


class Worker:
    """Claims jobs of one or more queues and runs them in threads.

    ::

        worker = Worker(pool, [Queue("emails", send_email, concurrency=10)])
        signal.signal(signal.SIGTERM, lambda *_: worker.stop())
        worker.run()  # returns after a graceful shutdown

    The pool serves every call; it must allow ``connections_needed``
    connections (one claim per queue, the completer, the heartbeater, the
    reaper). LISTEN uses one connection of its own, opened with the pool's
    conninfo.

    With ``direct_shards=True`` the pool is a pgbackoff router's
    (docs/sharding.md): the worker reads the router's layout at start and
    sends its claims, completions, failures, heartbeats and snoozes
    straight to the shards (a pool per shard it needs, of the same size,
    opened with the pool's conninfo and kwargs at the shard's address), and
    LISTENs on its queues' shards. Maintenance (reap, rotate, schedules,
    the idle look) and wake-up registrations go through the router. A
    layout change (a placement, a queue moved) is followed: the layout's
    version is read again when a claim finds fewer jobs than asked (at most
    once a second) and at each maintenance tick.
    """

    def __init__(
        self,
        pool: ConnectionPool,
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
        self.client = Client(pool, worker_id=worker_id, now=now)
        self.direct_shards = direct_shards
        #: Direct mode: the shards' pools, and a client on each.
        self._shards: Shards | None = None
        self._shard_clients: dict[int, Client] = {}
        self._listen_epoch = 0
        self.producers = [
            _Producer(q, _HandlerThreads(q.concurrency, f"pgbackoff-{q.name}"))
            for q in self.settings.queues
        ]
        self._stopping = threading.Event()  # stop claiming
        self._background_stop = threading.Event()  # stop listening, reaping, heartbeating
        self._lock = threading.Lock()
        self._attempts: dict[int, _Attempt] = {}
        self._handlers_done = threading.Condition(self._lock)
        self._beats = threading.Condition()
        self._completions: list[Completion] = []
        self._completer_stopped = False
        self._completer_cond = threading.Condition()
        self._listening = threading.Event()
        self._registered: dict[str, float] = {}
        #: Producers may park: the maintenance loop runs and makes the
        #: look (off for good on a schema without backoff.next_work).
        self._look_on = self.settings.maintains
        self._look_failed = False
        self._claims = 0  # claims that found jobs: busy or idle

    @property
    def worker_id(self) -> str:
        return self.client.worker_id

    @property
    def listening(self) -> bool:
        """Whether a notification would reach this worker now."""
        return self._listening.is_set()

    def stop(self) -> None:
        """Start the graceful shutdown (safe from a signal handler or any
        thread): run() stops claiming and returns after it."""
        self._stopping.set()
        for p in self.producers:
            p.signals.send(_pacing.WAKE)

    def run(self) -> None:
        """Check the schema, then claim and run jobs until stop() (or
        Ctrl-C). Then wait up to shutdown_timeout for running handlers,
        cancel those left (ctx.cause: WorkerShutdown: an exception now hands
        the job back, due at once), and return only when every handler has
        returned and its outcome is recorded: a handler that ignores its
        context keeps its job, leased to this worker (docs/adr/0028)."""
        self.client.check_schema()
        if self.direct_shards:
            shards = Shards(self.pool, self.settings.connections_needed(), [q.name for q in self.settings.queues])
            try:
                layout = shards.open()
            except BaseException:
                shards.close()
                raise
            self._shards = shards
            log.info("direct to the shards (router layout version %d): %s", layout.version, self._where())
        background = [threading.Thread(target=self._complete_loop, name="pgbackoff-completer")]
        background.append(threading.Thread(target=self._heartbeat_loop, name="pgbackoff-heartbeats"))
        if self.settings.listen:
            background.append(threading.Thread(target=self._listen_loop, name="pgbackoff-listen"))
        if self.settings.maintains:
            background.append(threading.Thread(target=self._maintain_loop, name="pgbackoff-maintenance"))
        producing = [
            threading.Thread(target=self._produce, args=(p,), name=f"pgbackoff-claim-{p.queue.name}")
            for p in self.producers
        ]
        for p in self.producers:
            p.handlers.start()
        for t in background + producing:
            t.daemon = True
            t.start()
        log.info("worker %s started: queues %s", self.worker_id, ", ".join(q.name for q in self.settings.queues))
        try:
            while not self._stopping.wait(1.0):
                pass
        except KeyboardInterrupt:
            self.stop()
        for t in producing:
            t.join()
        self._shutdown()
        for queue in list(self._registered):
            self._set_waiting(queue, False)
        self._background_stop.set()
        with self._beats:
            self._beats.notify_all()
        with self._completer_cond:
            self._completer_stopped = True
            self._completer_cond.notify_all()
        for t in background:
            t.join()
        for p in self.producers:
            p.handlers.shutdown()
        if self._shards is not None:
            self._shards.close()
        log.info("worker %s stopped", self.worker_id)

    # --- direct mode ---

    def _on_shard(self, shard: int) -> Client:
        c = self._shard_clients.get(shard)
        if c is None:
            assert self._shards is not None
            c = self._shard_clients.setdefault(shard, self.client.using(self._shards.pool(shard)))
        return c

    def _for_queue(self, queue: str) -> Client:
        """Where queue's claims go: its shard in direct mode, else the pool."""
        if self._shards is None:
            return self.client
        return self._on_shard(self._shards.queue_shard(queue))

    def _for_job(self, job_id: int) -> Client:
        """Where a job's settling calls go: its id's shard in direct mode."""
        if self._shards is None:
            return self.client
        return self._on_shard(job_shard(job_id))

    def _where(self) -> str:
        assert self._shards is not None
        return ", ".join(f"{q.name} on shard {self._shards.queue_shard(q.name)}" for q in self.settings.queues)

    def _follow(self, tick: bool = False) -> None:
        """Direct mode: read the router's layout version (at most once a
        second, or five from a maintenance tick) and follow a change: claims go to the queues'
        new shards, LISTEN moves, registrations are written again."""
        if self._shards is None:
            return
        try:
            changed = self._shards.follow(tick)
        except Exception as e:
            log.warning("read the router's layout failed; claims stay where they went: %s", e)
            return
        if changed:
            log.info("the router's layout changed: %s", self._where())
            self._registered.clear()
            self._listen_epoch += 1
            self._wake_all()

    # --- producers ---

    def _produce(self, p: _Producer) -> None:
        pacer = p.pacer
        poll = _pacing.Poll(self.settings.poll_interval)
        while not self._stopping.is_set():
            want = pacer.want(p.free(), self.client.now())
            if want:
                step = self._look(p, want)
                if step is not None:
                    if step.unregister:
                        self._set_waiting(p.queue.name, False)
                    if step.register:
                        self._set_waiting(p.queue.name, True)
                    if step.again:
                        continue
            # A drained queue leaves its poll to the worker's look, which
            # wakes it when a job comes due and renews its registration.
            parked = pacer.parked(self._look_on)
            p.parked = parked
            signals = p.signals.wait(3600.0 if parked else pacer.timeout(poll.until()), self._stopping)
            p.parked = False
            if not parked and poll.tick(signals) and pacer.idle:
                self._refresh(p.queue.name)
            pacer.signalled(signals)

    def _look(self, p: _Producer, want: int) -> _pacing.Step | None:
        """Claim up to want jobs and start them; then the pacer's step."""
        try:
            # A claim is never cut by the shutdown: a claim committed but
            # never read would leave its jobs running until the reaper.
            jobs = self._for_queue(p.queue.name).claim(p.queue.name, want, lease=p.queue.lease)
        except Exception as e:
            log.error("claim jobs in %r failed: %s", p.queue.name, e)
            p.pacer.failed()
            self._follow()
            return None
        if len(jobs) < want:
            # A queue that moved gives no claims on its old shard.
            self._follow()
        if jobs:
            self._claims += 1
            self._start(p, jobs)
            return p.pacer.found(len(jobs), want, woken=p.signals.take(_pacing.WAKE))
        read_mono, read_clock = time.monotonic(), self.client.now()
        state: QueueState | None = None
        try:
            state = self.client.queue_state(p.queue.name)
        except Exception as e:
            log.debug("read state of %r failed; the queue is treated as idle: %s", p.queue.name, e)
        return p.pacer.found_none(state, self.listening, read_mono, read_clock)

    def _set_waiting(self, queue: str, waiting: bool) -> None:
        """Write or end this worker's registration; a failure is logged
        (the poll still bounds how late a job starts)."""
        try:
            if waiting:
                self.client.wait_for_jobs(queue, ttl=self.settings.registration_ttl())
                self._registered[queue] = time.monotonic()
            else:
                self.client.stop_waiting(queue)
                self._registered.pop(queue, None)
        except Exception as e:
            log.warning("could not record whether the worker waits for %r; polling covers it: %s", queue, e)

    def _refresh(self, queue: str) -> None:
        at = self._registered.get(queue)
        if self.listening and (at is None or time.monotonic() - at > self.settings.registration_ttl() / 3):
            self._set_waiting(queue, True)

    def _wake_all(self) -> None:
        for p in self.producers:
            p.signals.send(_pacing.WAKE)

    # --- handlers ---

    def _start(self, p: _Producer, jobs: list[Job]) -> None:
        """Register a claim's attempts, then hand them to the handler
        threads: one lock each per claim, not per job."""
        clock = self.client.now()
        started = []
        for job in jobs:
            lease, every = self.settings.lease_and_beat(p.queue, job, clock)
            started.append(_Attempt(job, p.queue, lease, every))
        with self._lock:
            for a in started:
                self._attempts[a.job.id] = a
        with p.lock:
            p.inflight += len(started)
        with self._beats:
            self._beats.notify_all()
        for a in started:
            p.handlers.submit(self._run_attempt, p, a)

    def _run_attempt(self, p: _Producer, a: _Attempt) -> None:
        try:
            exc: BaseException | None = None
            try:
                p.queue.handler(a.job, a.ctx)
            except Exception as e:
                exc = e
            with self._lock:
                # From here on the heartbeater leaves the attempt alone.
                self._attempts.pop(a.job.id, None)
            if (o := attempt_outcome(a.job, exc, a.ctx.cause, a.ctx.output)) is not None:
                self._settle(a.job, o)
        except Exception:
            log.exception("job %d: recording its outcome failed; the reaper will retry it", a.job.id)
        finally:
            with self._lock:
                self._attempts.pop(a.job.id, None)
                self._handlers_done.notify_all()
            with p.lock:
                p.inflight -= 1
            p.signals.send(_pacing.FREED)

    def _settle(self, job: Job, o: Outcome) -> None:
        # A small output rides the batch; a larger one, which its queue's
        # limit may refuse, is a call of its own (BATCHED_OUTPUT_BYTES).
        if o.kind == "completed" and batched(o) and self._queue_completion(job, o.output):
            return
        try:
            if o.kind == "completed":
                try:
                    self._complete_one(job, o.output)
                except InvalidArgument as e:
                    if o.output is None:
                        raise
                    refused = Outcome("permanent", output_refused(e))
                    failed(job, refused, retry_transient(lambda: self._for_job(job.id).fail(job.id, job.attempt, refused.error, retryable=False)))
            elif o.kind == "snoozed":
                retry_transient(lambda: self._for_job(job.id).snooze(job.id, job.attempt, snooze_delay(o)))
            else:
                retryable = o.kind != "permanent"
                failed(job, o, retry_transient(lambda: self._for_job(job.id).fail(job.id, job.attempt, o.error, retry_in=o.delay, retryable=retryable)))
        except Exception as e:
            not_recorded(job, o, e)

    def _complete_one(self, job: Job, output: str | None = None) -> None:
        """Complete a job with one call, repeated on the connection's
        failures; a repeat refused because an earlier call whose reply was
        lost completed the job is the job's completion, not a refusal."""
        calls = 0

        def call() -> Job:
            nonlocal calls
            calls += 1
            if output is not None:
                return self._for_job(job.id).complete_with_output(job.id, job.attempt, RawJSON(output))
            return self._for_job(job.id).complete(job.id, job.attempt)

        try:
            retry_transient(call)
        except Exception as e:
            if not is_lost(e) or calls == 1 or not self._confirm([(job.id, job.attempt)]):
                raise

    def _confirm(self, refused: Sequence[tuple[int, int]]) -> set[int]:
        """Those of the refused completions (job, attempt) that an earlier,
        repeated call made: its reply was lost, so the repeat found the job
        completed. A token never repeats (docs/adr/0020), so a completed job
        whose attempts equal the token was completed by that attempt. If the
        check fails, the refusals stand."""
        try:
            done: set[int] = set()
            for shard, part in self._by_shard(refused).items():
                c = self.client if shard is None else self._on_shard(shard)
                done |= set(c.completed_by(*ids_and_attempts(part)))
            return confirmed(done)
        except Exception as e:
            return confirm_failed(refused, e)

    def _by_shard(self, items: Sequence[Row]) -> dict[int | None, list[Row]]:
        """Direct mode: settling items (job id first) by the job's shard;
        else all through the pool (None)."""
        if self._shards is None:
            return {None: list(items)}
        return {k: v for k, v in split_by_shard(items, lambda it: int(it[0])).items()}

    def _shutdown(self) -> None:
        """Wait for running handlers, cancel those left after the grace
        period, then wait for every one of them: their jobs stay leased to
        this worker (heartbeats go on) until they return."""
        deadline = time.monotonic() + self.settings.shutdown_timeout
        with self._lock:
            while self._attempts and time.monotonic() < deadline:
                self._handlers_done.wait(deadline - time.monotonic())
            left = list(self._attempts.values())
        if left:
            log.warning("shutdown timeout: cancelling %d running handlers", len(left))
            for a in left:
                a.ctx.cancel(WorkerShutdown("worker shutdown"))
        with self._lock:
            while self._attempts:
                if not self._handlers_done.wait(10.0) and self._attempts:
                    log.error(
                        "handlers ignore their cancellation; jobs %s stay leased to this worker until they return",
                        sorted(self._attempts),
                    )
        for p in self.producers:
            # Outcomes are recorded after an attempt leaves the registry.
            p.handlers.shutdown()

    # --- heartbeats ---

    def _heartbeat_loop(self) -> None:
        """Extend the leases of running attempts, and cancel a handler
        whose lease was lost (LeaseLost) or ran out (LeaseExpired)."""
        while not self._background_stop.is_set():
            now = time.monotonic()
            with self._lock:
                running = list(self._attempts.values())
            wake_at = now + 1.0
            for a in running:
                if now >= a.deadline and a.ctx.cancel(LeaseExpired("lease expired")):
                    log.warning("job %d attempt %d: lease expired; cancelling the handler", a.job.id, a.job.attempt)
                if a.next_beat is not None and a.every is not None and not isinstance(a.ctx.cause, LeaseLost):
                    if now >= a.next_beat:
                        self._beat(a)
                        a.next_beat = time.monotonic() + a.every
                    wake_at = min(wake_at, a.next_beat)
                if not a.ctx.cancelled:
                    wake_at = min(wake_at, a.deadline)
            with self._beats:
                self._beats.wait(max(0.0, wake_at - time.monotonic()))

    def _beat(self, a: _Attempt) -> None:
        try:
            if (progress := a.ctx.take_progress()) is not None:
                until = self._for_job(a.job.id).heartbeat_progress(a.job.id, a.job.attempt, RawJSON(progress), extend=a.queue.lease)
            else:
                until = self._for_job(a.job.id).heartbeat(a.job.id, a.job.attempt, extend=a.queue.lease)
        except Exception as e:
            if is_lost(e):
                log.warning("job %d attempt %d: lease lost; cancelling the handler: %s", a.job.id, a.job.attempt, e)
                a.ctx.cancel(LeaseLost(str(e)))
                a.next_beat = None
            else:
                log.error("heartbeat of job %d failed; will retry: %s", a.job.id, e)
            return
        left = lease_left(until, self.client.now())
        if left > 0:
            a.deadline = time.monotonic() + left

    # --- completer ---

    def _queue_completion(self, job: Job, output: str | None = None) -> bool:
        """Hand a completion to the completer; False once it has stopped."""
        with self._completer_cond:
            if self._completer_stopped:
                return False
            self._completions.append((job.id, job.attempt, job.queue, output))
            self._completer_cond.notify_all()
            return True

    def _complete_loop(self) -> None:
        """Write queued completions with complete_many: whatever queued up
        while the last call ran forms the next batch, so an idle worker
        writes at once and a busy one one statement per burst."""
        while True:
            with self._completer_cond:
                self._completer_cond.wait_for(lambda: bool(self._completions) or self._completer_stopped)
                batch = self._completions[:MAX_COMPLETE_BATCH]
                del self._completions[:MAX_COMPLETE_BATCH]
                stop = self._completer_stopped and not self._completions
            if batch:
                self._flush(batch)
            if stop:
                return

    def _flush(self, batch: list[Completion]) -> None:
        """One complete_many per shard in direct mode, else one."""
        for shard, part in self._by_shard(batch).items():
            self._flush_on(self.client if shard is None else self._on_shard(shard), part)

    def _flush_on(self, client: Client, batch: list[Completion]) -> None:
        calls = 0

        def call() -> list[int]:
            nonlocal calls
            calls += 1
            if (outputs := _raw(batch_outputs(batch))) is not None:
                return client.complete_many(*ids_and_attempts(batch), outputs)
            return client.complete_many(*ids_and_attempts(batch))

        try:
            done = set(retry_transient(call))
        except Exception as e:
            log.error("could not record %d completions; the reaper will retry the jobs: %s", len(batch), e)
            return
        if calls > 1 and len(done) < len(batch):
            done |= self._confirm(refusals(batch, done))
        queues = settled_queues(batch, done)
        for p in self.producers:
            if p.queue.name in queues:
                p.signals.send(_pacing.SETTLED)

    # --- listener and reaper ---

    def _listen_loop(self) -> None:
        """Wake a queue's producer when enqueue notifies it. One connection
        of its own, outside the pool (it carries the subscription); after
        an error it reconnects, and polling covers the gap."""
        retry = 0.1
        while not self._background_stop.is_set():
            try:
                epoch = self._listen_epoch
                self._listen_once()
                if epoch != self._listen_epoch:
                    retry = 0.1
                    continue
            except Exception as e:
                if self._background_stop.is_set():
                    return
                log.warning("listen failed; polling until it reconnects in %.1fs: %s", retry, e)
            finally:
                self._listening.clear()
            self._background_stop.wait(retry)
            retry = min(retry * 2, 30.0)

    def _listen_once(self) -> None:
        """LISTEN on the pool's database, or in direct mode on each shard
        of the served queues (enqueue notifies on the shard); a layout
        change ends it, and the loop listens again where the queues are."""
        epoch = self._listen_epoch
        where = [(self.pool.conninfo, dict(self.pool.kwargs))]
        if self._shards is not None:
            where = [shard_params(self.pool.conninfo, self.pool.kwargs, a) for a in self._shards.served().values()]
        conns: list[psycopg.Connection[Any]] = []
        try:
            for conninfo, kwargs in where:
                kw: dict[str, Any] = {**kwargs, "autocommit": True}
                conns.append(psycopg.connect(conninfo, **kw))
                conns[-1].execute(f"LISTEN {NOTIFY_CHANNEL}")
            self._listening.set()
            # Look again: jobs enqueued before LISTEN took effect, and a
            # producer that found its queue empty registers now.
            self._wake_all()
            by_queue = {p.queue.name: p for p in self.producers}
            while not self._background_stop.is_set() and epoch == self._listen_epoch:
                ready, _, _ = select.select([c.fileno() for c in conns], [], [], 0.2)
                for conn in conns:
                    if conn.fileno() not in ready:
                        continue
                    conn.pgconn.consume_input()
                    while (n := conn.pgconn.notifies()) is not None:
                        queue = n.extra.decode()
                        if queue in by_queue:
                            by_queue[queue].signals.send(_pacing.WAKE)
                        elif not queue:
                            self._wake_all()
        finally:
            for conn in conns:
                conn.close()

    def _maintain_loop(self) -> None:
        """Fire due schedules at start, then make the idle queues' look every
        poll interval (docs/adr/0083): it wakes the parked producers whose
        queue has a job due and fires, reaps and rotates only when each has
        work; reap and rotate keep their reap_interval while jobs flow, and
        all three run once every IDLE_MAINTENANCE seconds idle. One call at
        a time on one connection, as the Go Worker does; every call is safe
        from many workers at once, so no leader is needed. Without the look
        (a schema before next_work, a look that failed) each runs at its own
        interval."""
        s = self.settings
        m = _pacing.Maintenance(s.reap_interval, s.schedule_interval, time.monotonic(), s.look_every() if self._look_on else None)
        claims = self._claims
        while not self._background_stop.wait(max(0.0, m.due() - time.monotonic())):
            self._follow(tick=True)
            now = time.monotonic()
            if m.fire_due(now):
                self._fire_schedules()
                m.fired(time.monotonic())
            if m.next_reap is not None and now >= m.next_reap:
                busy = self._claims != claims or any(p.inflight for p in self.producers)
                claims = self._claims
                if m.reap_due(now, busy):
                    self._reap()
                    m.reaped(time.monotonic())
                    m.full(time.monotonic())
            if m.look_due(now):
                self._look_and_do(m)
                m.looked(time.monotonic())
                if m.full_due(now):
                    # Idle or not: backoff.liveness sees the maintenance
                    # run, and rotate names this worker to it.
                    if s.reap_interval:
                        self._reap()
                    if s.schedule_interval is not None:
                        self._fire_schedules()
                    m.full(time.monotonic())

    def _look_and_do(self, m: _pacing.Maintenance) -> None:
        """One look (backoff.next_work) for the parked queues, and what it
        found due; after a failed look every producer claims, and the loop
        fires, reaps and rotates at their own intervals until a look works."""
        s = self.settings
        parked = [p.queue.name for p in self.producers if p.parked]
        try:
            rows = self.client.next_work(parked, register=self.listening, ttl=s.registration_ttl())
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
            self._fire_schedules()
        if s.reap_interval:
            if found.reap:
                self._reap_leases()
            if found.rotate:
                self._rotate()

    def _reap(self) -> None:
        """Send expired leases of crashed workers back through the retry
        decision, then rotate the live jobs' segments (docs/adr/0061)."""
        self._reap_leases()
        self._rotate()

    def _reap_leases(self) -> None:
        try:
            if reaped(self.client.reap()):
                self._wake_all()
        except Exception as e:
            log.error("reap failed: %s", e)

    def _rotate(self) -> None:
        try:
            # Named: the worker counts as seen (backoff.liveness), busy or idle.
            self.client.rotate(worker=self.client.worker_id)
        except Exception as e:
            log.error("rotate failed: %s", e)

    def _fire_schedules(self) -> None:
        """Enqueue the jobs of the schedules due now (docs/schedules.md).
        A failure is a warning: a slot stays due until a call fires it."""
        try:
            if fired(self.client.fire_schedules()):
                self._wake_all()
        except Exception as e:
            log.warning("fire schedules failed: %s", e)
