"""The blocking client: one method per ``backoff.*`` SQL function."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import secrets
import select
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg.pq import TransactionStatus
from psycopg.rows import tuple_row
from psycopg_pool import ConnectionPool

from . import _moving, _sql
from .errors import SchemaTooOld, reraise
from .types import DeadLetterGroup, Duration, Job, JobDetail, NewJob, QueueState, QueueStats, ReplayOutcome, ScheduleFire, as_seconds
from .workflows import FINISHED, FinishedJob, GraphLike, ParentOutput, encode_json, graph_text

T = TypeVar("T")

#: What a Client runs its calls on: a pool (each call on a connection of
#: its own, committed at once), or a connection (the call joins the
#: connection's transaction, if one is open: commit it yourself).
DB = ConnectionPool | psycopg.Connection[Any]

#: A clock: the time to pass as p_now. None: the database's clock.
Clock = Callable[[], dt.datetime]


def default_worker_id() -> str:
    """host-pid-random: the name a worker writes into locked_by."""
    return f"{socket.gethostname() or 'worker'}-{os.getpid()}-{secrets.token_hex(3)}"


class Client:
    """Calls of the ``backoff.*`` SQL functions on a pool or a connection.

    Every method is one statement, one call of one function; errors with a
    documented SQLSTATE raise the exceptions of :mod:`pgbackoff.errors`.
    To enqueue atomically with your own writes, run on your transaction::

        with pool.connection() as conn, conn.transaction():
            conn.execute("INSERT INTO orders ...")
            client.using(conn).enqueue("emails", {"order": 42})

    ``now`` injects a clock passed as every call's p_now (tests and
    simulations drive time without sleeping); without it the database's
    clock decides.
    """

    def __init__(self, db: DB, *, worker_id: str | None = None, now: Clock | None = None) -> None:
        self._db = db
        self.worker_id = worker_id or default_worker_id()
        self._now = now
        # Whether the sessions of db start at another level than READ
        # COMMITTED (read at the first call that may need it); None: not
        # read yet.
        self._other_level: bool | None = None

    def using(self, db: DB) -> Client:
        """A client with the same worker id and clock, running on db (a
        connection inside your transaction, say)."""
        return Client(db, worker_id=self.worker_id, now=self._now)

    def now(self) -> dt.datetime | None:
        """The p_now of the next call: the injected clock's time, or None."""
        return self._now() if self._now is not None else None

    def _run(self, call: _sql.Call[T]) -> T:
        try:
            if isinstance(self._db, ConnectionPool):
                with self._db.connection() as conn:
                    rows = self._fetch(conn, call, pooled=True)
            else:
                rows = self._fetch(self._db, call, pooled=False)
        except psycopg.Error as e:
            reraise(call.op, e)
        return call.decode(rows)

    def _enqueue(self, call: _sql.Call[T]) -> T:
        """Run an enqueue; on a pool, again while the queue is moving to
        another shard (_moving). On a connection the caller's transaction
        has been aborted by the refusal: QueueMoving is raised at once."""
        if isinstance(self._db, ConnectionPool):
            return _moving.retry_while_moving(lambda: self._run(call))
        return self._run(call)

    def _fetch(self, conn: psycopg.Connection[Any], call: _sql.Call[Any], *, pooled: bool) -> _sql.Rows:
        """Run the call at READ COMMITTED (docs/adr/0080): as it is where the
        sessions start there, else in a transaction of its own. A call in
        the caller's transaction, or on the caller's connection outside
        autocommit (whose transaction the caller commits), runs as it is."""
        if not can_run_alone(conn, pooled):
            return _fetch(conn, call)
        if self._other_level is None:
            self._other_level = other_default_level(conn)
        if not self._other_level:
            return _fetch(conn, call)
        return _fetch_read_committed(conn, call)

    # --- schema ---

    def schema_version(self) -> int | None:
        """backoff.schema_version(): the migration installed."""
        return self._run(_sql.schema_version())

    def check_schema(self) -> None:
        """Raise SchemaTooOld unless the schema is installed, at the version
        this package needs or later (migrations only add)."""
        try:
            have = self.schema_version()
        except MISSING_SCHEMA as e:
            raise missing_schema(e) from e
        if (err := schema_too_old(have)) is not None:
            raise err

    # --- producers ---

    def enqueue(
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
        """Add a job (payload: any JSON value; None is {}) and return its id:
        the existing job's id when dedupe_key matches an unfinished job. On
        a pool, an enqueue refused because the queue is moving to another
        shard (QueueMoving) is tried again for up to 10 s; the same holds
        for enqueue_many and enqueue_graph."""
        return self._enqueue(
            _sql.enqueue(
                queue, payload, run_at=run_at, max_attempts=max_attempts, priority=priority,
                dedupe_key=dedupe_key, policy=policy, now=self.now(),
            )
        )  # fmt: skip

    def enqueue_many(self, jobs: Sequence[NewJob]) -> list[int]:
        """Add jobs in one statement (atomic) and return their ids in order."""
        if not jobs:
            return []
        return self._enqueue(_sql.enqueue_many(jobs, self.now()))

    # --- workers ---

    def claim(self, queue: str, limit: int = 1, *, lease: Duration | None = None) -> list[Job]:
        """Take up to limit due jobs, each running under a new attempt (its
        fencing token) with a lease (None: the policy's)."""
        return self._run(_sql.claim(queue, self.worker_id, limit, lease, self.now()))

    def acquire(self, job_id: int, *, lease: Duration | None = None) -> Job:
        """Claim one given job if it is due (NotReady says when it will be)."""
        return self._run(_sql.acquire(job_id, self.worker_id, lease, self.now()))

    def complete(self, job_id: int, attempt: int) -> Job:
        """Mark running attempt ``attempt`` of the job completed."""
        return self._run(_sql.complete(job_id, attempt, self.now()))

    def complete_with_output(self, job_id: int, attempt: int, output: Any) -> Job:
        """Complete the running attempt as complete does, and record output
        (any JSON value; a RawJSON as it is) as the job's result, which
        job_output and its dependents' parent_outputs read. An output over
        the queue's max_output_bytes is refused (InvalidArgument) and the
        job stays running."""
        op = f"complete job {job_id} (attempt {attempt})"
        return self._run(_sql.complete(job_id, attempt, self.now(), encode_json(op + ": output", output)))

    def complete_many(
        self, job_ids: Sequence[int], attempts: Sequence[int], outputs: Sequence[Any] | None = None
    ) -> list[int]:
        """Complete each job still running its given attempt, in one
        statement; returns the ids completed (a stale entry is skipped).
        outputs[i], unless None, is recorded as job_ids[i]'s output; one
        over its queue's limit refuses the whole batch."""
        texts = None if outputs is None else [None if o is None else encode_json(f"complete {len(job_ids)} jobs: output", o) for o in outputs]
        return self._run(_sql.complete_many(job_ids, attempts, self.now(), texts))

    def completed_by(self, job_ids: Sequence[int], attempts: Sequence[int]) -> list[int]:
        """The ids of those jobs that their given attempt completed: after a
        completion whose reply was lost, whether it landed."""
        return self._run(_sql.completed_by(job_ids, attempts))

    def fail(
        self,
        job_id: int,
        attempt: int,
        error: str,
        *,
        retry_in: Duration | None = None,
        retryable: bool = True,
    ) -> Job:
        """Report a failed attempt; the database decides retry or dead
        letter, and the returned job says which. retry_in asks for that
        delay (capped at the policy's max); retryable=False dead-letters."""
        return self._run(_sql.fail(job_id, attempt, error, retry_in=retry_in, retryable=retryable, now=self.now()))

    def heartbeat(self, job_id: int, attempt: int, *, extend: Duration | None = None) -> dt.datetime:
        """Extend the running attempt's lease to now + extend (None: the
        policy's lease); returns the new lease end. StaleAttempt: lost."""
        return self._run(_sql.heartbeat(job_id, attempt, extend, self.now()))

    def heartbeat_progress(self, job_id: int, attempt: int, progress: Any, *, extend: Duration | None = None) -> dt.datetime:
        """heartbeat, recording progress (any JSON value, at most 8 KiB) as
        the job's progress, which backoff.job_detail and `backoffctl jobs
        show` display."""
        op = f"heartbeat job {job_id} (attempt {attempt})"
        return self._run(_sql.heartbeat(job_id, attempt, extend, self.now(), encode_json(op + ": progress", progress)))

    # --- workflows (docs/workflows.md) ---

    def enqueue_graph(self, graph: GraphLike) -> dict[str, int]:
        """Enqueue every job of graph (a Graph, or the documents
        backoff.enqueue_graph takes) in one call and one transaction, and
        return each job's id by its ref. A job with a parent that has not
        completed is blocked until its last parent completes. Cycles,
        self-dependencies and unknown refs or ids are refused
        (InvalidArgument, naming them), and nothing is enqueued."""
        return self._enqueue(_sql.enqueue_graph(*graph_text(graph), self.now()))

    def job_output(self, job_id: int) -> Any:
        """The output the job recorded when it completed; None when it
        recorded none or has not completed."""
        return self._run(_sql.job_output(job_id))

    def parent_outputs(self, job_id: int) -> list[ParentOutput]:
        """In one call, the jobs job_id depends on with their status and
        output, in id order; none for a job without dependencies."""
        return self._run(_sql.parent_outputs(job_id))

    def wait_for_output(self, job_id: int, *, timeout: Duration = 60.0, poll_interval: Duration = 1.0) -> FinishedJob:
        """Wait until the job has finished (completed, dead-lettered or
        cancelled) and return how it ended with its output. It registers
        with backoff.await_job, so that the call that finishes the job
        notifies channel backoff_finished: over a pool it LISTENs on a
        connection of the pool for the wait (its calls take another) and
        returns as soon as the job finishes, and looks at the job every poll_interval in case a
        notification is missed; on a connection it polls. TimeoutError
        after timeout seconds; JobNotFound for a job that does not exist
        (or of a queue the caller may not read)."""
        deadline = time.monotonic() + as_seconds(timeout)
        poll = as_seconds(poll_interval)
        ttl = max(60.0, 3 * poll)
        listening = _listening(self._db) if isinstance(self._db, ConnectionPool) else contextlib.nullcontext(None)
        with listening as conn:
            registered = False
            try:
                while True:
                    status = self._run(_sql.await_job(job_id, self.worker_id, ttl))
                    if status in FINISHED:
                        return FinishedJob(job_id, status, self.job_output(job_id))
                    registered = True
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(f"wait for the output of job {job_id}: not finished after {as_seconds(timeout)}s")
                    if conn is None:
                        time.sleep(min(poll, left))
                    else:
                        _wait_notified(conn, str(job_id), min(poll, left))
            except BaseException:
                if registered:
                    with contextlib.suppress(Exception):
                        self._run(_sql.stop_awaiting(job_id, self.worker_id))
                raise

    def snooze(self, job_id: int, attempt: int, delay: Duration) -> Job:
        """Put the running attempt back to pending for delay; no attempt spent."""
        return self._run(_sql.snooze(job_id, attempt, delay, self.now()))

    def reap(self, limit: int | None = None) -> int:
        """Settle running jobs whose lease expired as failed attempts."""
        return self._run(_sql.reap(limit, self.now()))

    def rotate(self, worker: str | None = None) -> int:
        """Maintain the segments the live jobs are stored in (backoff.rotate,
        docs/adr/0061); returns the rows it moved. The worker calls it with
        every reap, naming itself (worker): backoff.liveness then counts it
        among the workers seen, busy or idle (docs/adr/0079)."""
        return self._run(_sql.rotate(self.now(), worker))

    def fire_schedules(self, limit: int | None = None) -> list[ScheduleFire]:
        """Enqueue one job for every schedule slot due now, at most limit
        (None: the function's default, 1000) in one call, and return them
        (``backoff.fire_schedules``). Any number of callers may run it at
        once: a slot is enqueued once. The worker calls it every
        schedule_interval."""
        return self._run(_sql.fire_schedules(limit, self.now()))

    def queue_state(self, queue: str) -> QueueState:
        """The queue's breaker and rate limit now, and when a claim can next
        return a job (next_claim_at)."""
        return self._run(_sql.queue_state(queue, self.now()))

    def wait_for_jobs(self, queue: str, ttl: Duration = 60) -> dt.datetime:
        """Register that this worker waits for the queue: until the returned
        expiry, enqueue notifies channel backoff_jobs for it."""
        return self._run(_sql.wait_for_jobs(queue, self.worker_id, ttl))

    def stop_waiting(self, queue: str) -> bool:
        """End the registration; whether one existed."""
        return self._run(_sql.stop_waiting(queue, self.worker_id))

    def next_work(self, queues: Sequence[str], *, register: bool = False, ttl: Duration = 30) -> list[tuple[str, str, bool]]:
        """The idle worker's one look (``backoff.next_work``, docs/adr/0083):
        (kind, queue, due) rows, kind queue (one per queue: a claim can
        return a job), schedules, reap or rotate (queue ""). register renews
        this worker's wake-up registrations of the queues when they expire
        within ttl / 3."""
        return self._run(_sql.next_work(queues, self.worker_id if register else None, ttl if register else None, self.now()))

    # --- operators ---

    def cancel(self, job_id: int, reason: str | None = None) -> Job:
        """Cancel an unfinished job (terminal; replay brings it back)."""
        return self._run(_sql.cancel(job_id, reason, self.now()))

    def replay(self, job_id: int) -> Job:
        """Bring a dead-lettered or cancelled job back with a fresh budget."""
        return self._run(_sql.replay(job_id, self.now()))

    def replay_dead_letters(self, queue: str) -> list[ReplayOutcome]:
        """Replay every dead letter of the queue; one outcome each."""
        return self._run(_sql.replay_dead_letters(queue, self.now()))

    def list_jobs(
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
        return self._run(
            _sql.list_jobs(queue, statuses, dead_letter_reason, order, after_id, after_completed_at, limit, payloads)
        )

    def job_detail(self, job_id: int) -> JobDetail | None:
        """A job with its effective policy (``backoff.job_detail``); None when
        there is no such job. Admin only."""
        return self._run(_sql.job_detail(job_id))

    def dead_letter_groups(self, queue: str | None = None, limit: int = 200) -> list[DeadLetterGroup]:
        """Dead letters grouped by queue, reason and error signature, largest
        first (``backoff.dead_letter_groups``). Admin only."""
        return self._run(_sql.dead_letter_groups(queue, limit))

    def stats(self, window: Duration | None = None) -> list[QueueStats]:
        """Per queue: jobs by status, the due backlog, and the retries and
        dead letters of the window (None: an hour). Scans the table."""
        return self._run(_sql.stats(window, self.now()))

    def prune(self, older_than: Duration, limit: int | None = None) -> int:
        """Delete finished jobs finished more than older_than ago."""
        return self._run(_sql.prune(older_than, limit, self.now()))

    def pause_queue(self, queue: str) -> bool:
        """Stop claims of the queue; whether it was running."""
        return self._run(_sql.pause_queue(queue))

    def resume_queue(self, queue: str) -> bool:
        """Let claims of the queue start again; whether it was paused."""
        return self._run(_sql.resume_queue(queue))


@contextlib.contextmanager
def _listening(pool: ConnectionPool) -> Iterator[psycopg.Connection[Any]]:
    """A connection of the pool LISTENing on backoff_finished for the block;
    UNLISTENed before it goes back (closed if that fails, so that the pool
    never lends a listening connection)."""
    with pool.connection() as conn:
        was = conn.autocommit
        conn.autocommit = True
        conn.execute(f"LISTEN {_sql.FINISHED_CHANNEL}")
        try:
            yield conn
        finally:
            try:
                conn.execute(f"UNLISTEN {_sql.FINISHED_CHANNEL}")
                conn.autocommit = was
            except psycopg.Error:
                conn.close()


def _wait_notified(conn: psycopg.Connection[Any], job_id: str, timeout: float) -> bool:
    """Wait up to timeout seconds for a notification of the job on conn;
    whether one came."""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        ready, _, _ = select.select([conn.fileno()], [], [], left)
        if not ready:
            return False
        conn.pgconn.consume_input()
        found = False
        while (n := conn.pgconn.notifies()) is not None:
            found = found or n.extra.decode() == job_id
        if found:
            return True
    return False


def _fetch(conn: psycopg.Connection[Any], call: _sql.Call[Any]) -> _sql.Rows:
    with conn.cursor(row_factory=tuple_row) as cur:
        cur.execute(call.sql, call.params)
        return cur.fetchall()


# The queue's functions are written for READ COMMITTED (docs/adr/0080): a
# claim's FOR UPDATE SKIP LOCKED follows a row another session updated
# instead of failing, and rotate truncates only there. Where the sessions'
# default_transaction_isolation is another level, each call runs in a READ
# COMMITTED transaction of its own: BEGIN, the statement and COMMIT sent in
# one pipeline, one round trip.

#: Reads the level the sessions start their transactions at.
READ_DEFAULT_LEVEL = "SELECT current_setting('default_transaction_isolation')"
#: Opens a call's own transaction.
BEGIN_READ_COMMITTED = "BEGIN ISOLATION LEVEL READ COMMITTED"


def can_run_alone(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any], pooled: bool) -> bool:
    """Whether a call may run in a transaction of its own on conn: it is
    idle, and either the client's pool lent it or it is in autocommit (a
    caller's connection outside autocommit gets the call in the transaction
    it will commit)."""
    return conn.info.transaction_status == TransactionStatus.IDLE and (pooled or conn.autocommit)


def other_default_level(conn: psycopg.Connection[Any]) -> bool:
    """Whether conn's sessions start their transactions at another level
    than READ COMMITTED."""
    with autocommit(conn):
        row = conn.execute(READ_DEFAULT_LEVEL).fetchone()
    return row is not None and row[0] != "read committed"


@contextlib.contextmanager
def autocommit(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """conn in autocommit for the block (so that psycopg opens no
    transaction of its own), then as it was. Both are client-side only."""
    if conn.autocommit:
        yield
        return
    conn.autocommit = True
    try:
        yield
    finally:
        if conn.info.transaction_status == TransactionStatus.IDLE:
            conn.autocommit = False


def _fetch_read_committed(conn: psycopg.Connection[Any], call: _sql.Call[Any]) -> _sql.Rows:
    """Run the call as BEGIN ISOLATION LEVEL READ COMMITTED, the statement,
    COMMIT: in one pipeline (one round trip) where libpq has pipeline mode,
    else one after the other. A failure rolls the transaction back, so that
    the connection goes back idle."""
    with autocommit(conn):
        cur = conn.cursor(row_factory=tuple_row)
        try:
            with conn.pipeline() if psycopg.Pipeline.is_supported() else contextlib.nullcontext():
                conn.execute(BEGIN_READ_COMMITTED)
                cur.execute(call.sql, call.params)
                conn.execute("COMMIT")
            return cur.fetchall()
        except BaseException:
            if not conn.closed and conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
                with contextlib.suppress(psycopg.Error):
                    conn.execute("ROLLBACK")
            raise
        finally:
            cur.close()


#: The errors of a database where the schema is not installed at all.
MISSING_SCHEMA = (psycopg.errors.InvalidSchemaName, psycopg.errors.UndefinedFunction, psycopg.errors.UndefinedTable)


def missing_schema(err: psycopg.Error) -> SchemaTooOld:
    """The error for a database without the schema."""
    return SchemaTooOld(
        "check pgbackoff schema",
        f"it is not installed (need version {_sql.REQUIRED_SCHEMA}): run `backoffctl migrate up`",
        err,
    )


def schema_too_old(have: int | None) -> SchemaTooOld | None:
    """The error for a schema older than this package needs, else None (a
    newer schema is fine: migrations only add)."""
    if have is not None and have >= _sql.REQUIRED_SCHEMA:
        return None
    return SchemaTooOld(
        "check pgbackoff schema",
        f"the database is at version {have or 0}, this package needs {_sql.REQUIRED_SCHEMA}: "
        "run `backoffctl migrate up`",
    )
