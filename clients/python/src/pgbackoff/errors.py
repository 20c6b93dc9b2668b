"""Errors: the SQL API's SQLSTATEs as exceptions, and the exceptions a
handler raises to steer its job's retry.

The SQLSTATEs are translated in one place, :func:`translate`; the psycopg
error stays reachable as ``__cause__`` (and ``pgerror``) for the server's
message, detail and hint.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import NoReturn

import psycopg

from .types import Duration, as_interval

# The SQLSTATEs of the SQL API (docs/design.md#errors).
INVALID_ARGUMENT = "22023"
JOB_NOT_FOUND = "BK001"
STALE_ATTEMPT = "BK002"
INVALID_TRANSITION = "BK003"
NOT_READY = "BK004"
PERMISSION_DENIED = "42501"
QUEUE_MOVING = "55006"


class PgBackoffError(Exception):
    """A call of a ``backoff.*`` function that the database refused.

    ``str(err)`` names the operation: ``claim jobs in "emails": ...``.
    """

    sqlstate: str | None = None

    def __init__(self, operation: str, message: str, pgerror: psycopg.Error | None = None) -> None:
        super().__init__(f"{operation}: {message}")
        self.operation = operation
        #: The server's error, for its diag (message, detail, hint).
        self.pgerror = pgerror


class InvalidArgument(PgBackoffError, ValueError):
    """An argument was refused (SQLSTATE 22023): an empty queue, a limit
    below 1, a negative interval, an unknown policy, a p_now too far from
    the database's clock..."""

    sqlstate = INVALID_ARGUMENT


class JobNotFound(PgBackoffError, LookupError):
    """No job has that id (SQLSTATE BK001)."""

    sqlstate = JOB_NOT_FOUND


class StaleAttempt(PgBackoffError):
    """The attempt (the fencing token) is not the job's running attempt: the
    lease was reaped, or another claim holds the job (SQLSTATE BK002). A
    worker that gets it has lost the job and must stop working on it."""

    sqlstate = STALE_ATTEMPT


class InvalidTransition(PgBackoffError):
    """The job's status does not allow the call: completing a dead letter,
    replaying a pending job (SQLSTATE BK003)."""

    sqlstate = INVALID_TRANSITION


class NotReady(PgBackoffError):
    """``acquire`` of a job whose run_at is still ahead (SQLSTATE BK004):
    come back at ``retry_at``."""

    sqlstate = NOT_READY

    def __init__(self, operation: str, message: str, pgerror: psycopg.Error | None = None) -> None:
        super().__init__(operation, message, pgerror)
        diag = pgerror.diag if pgerror is not None else None
        #: The job's run_at, from the error's DETAIL (ISO 8601, UTC).
        self.retry_at: dt.datetime | None = None
        #: The job's attempts so far, from the HINT (attempts=N).
        self.attempts: int | None = None
        if diag is not None and diag.message_detail:
            try:
                self.retry_at = dt.datetime.fromisoformat(diag.message_detail.strip())
            except ValueError:
                pass
        if diag is not None and diag.message_hint:
            m = re.search(r"attempts=(\d+)", diag.message_hint)
            if m:
                self.attempts = int(m.group(1))


class PermissionDenied(PgBackoffError):
    """The login may not make this call (SQLSTATE 42501): its role lacks the
    function, or ``backoff.grant_queue`` scopes it to other queues."""

    sqlstate = PERMISSION_DENIED


class QueueMoving(PgBackoffError):
    """The queue is moving away from this shard (SQLSTATE 55006; ``backoffctl
    shards move``, docs/sharding.md): enqueue again, through the router,
    which sends the job to the new shard once the move flips. A client on a
    pool does so by itself (enqueue, enqueue_many and enqueue_graph, for up
    to 10 s); on a connection, in your transaction, it cannot: the error
    has aborted the transaction, and it is raised at once."""

    sqlstate = QUEUE_MOVING


class NotARouter(PgBackoffError):
    """direct_shards was asked of a Worker whose pool is not a pgbackoff
    router's (its database has no backoff.router_layout), or the router
    lists no shard that a queue or a job needs (docs/sharding.md)."""


class SchemaTooOld(PgBackoffError):
    """The database's pgbackoff schema is missing or older than this package
    needs: run ``backoffctl migrate up``."""


_BY_SQLSTATE: dict[str, type[PgBackoffError]] = {
    c.sqlstate: c
    for c in (InvalidArgument, JobNotFound, StaleAttempt, InvalidTransition, NotReady, PermissionDenied, QueueMoving)
    if c.sqlstate is not None
}


def translate(operation: str, err: psycopg.Error) -> Exception:
    """The exception to raise (``from err``) for a psycopg error of a call:
    one of the classes above for a documented SQLSTATE, else ``err``."""
    cls = _BY_SQLSTATE.get(err.sqlstate or "")
    if cls is None:
        return err
    return cls(operation, err.diag.message_primary or str(err), err)


def reraise(operation: str, err: psycopg.Error) -> NoReturn:
    """Raise what translate maps err to, from err; err itself if unmapped."""
    mapped = translate(operation, err)
    if mapped is err:
        raise err
    raise mapped from err


def transient(err: BaseException) -> bool:
    """Whether err may go away by itself: the connection or the transaction
    failed, not the call (no SQLSTATE; or class 08 connection, 40
    rollback, 53 resources, 57 operator intervention). The worker repeats
    settle calls that fail with it: they are fenced by the attempt, so a
    repeat takes effect once or is refused, never lands on a later claim."""
    if isinstance(err, PgBackoffError) or not isinstance(err, psycopg.Error):
        return False
    if err.sqlstate is None:
        return isinstance(err, (psycopg.OperationalError, psycopg.InterfaceError))
    return err.sqlstate[:2] in ("08", "40", "53", "57")


# Why a handler's context was cancelled (Context.cause).


class Cancelled(Exception):
    """Base of the reasons a running handler is asked to stop."""


class LeaseLost(Cancelled):
    """The database refused a heartbeat: the attempt is no longer the job's
    (reaped, claimed again, cancelled). Nothing the handler does now can
    settle the job; its result is dropped."""


class LeaseExpired(Cancelled):
    """The lease ran out without a successful heartbeat (heartbeats off, or
    the database unreachable): the job may run elsewhere."""


class WorkerShutdown(Cancelled):
    """The worker is shutting down and its grace period has passed: return
    now. An exception then hands the job back, due at once elsewhere."""


# Exceptions a handler raises to steer its job's retry. The database still
# decides (caps the delay at the policy's max, dead-letters a job out of
# attempts); these only say what the handler knows.


class Permanent(Exception):
    """Retrying cannot fix this: the job is dead-lettered now (fail with
    ``p_retryable => false``, reason non_retryable)."""


class RetryAfter(Exception):
    """Retry after ``delay`` (a downstream's Retry-After) instead of the
    policy's delay: fail with ``p_retry_in``, which the database caps at the
    policy's max. The attempt is spent."""

    def __init__(self, message: str, delay: Duration) -> None:
        super().__init__(message)
        self.delay = as_interval(delay)


class Snooze(Exception):
    """Not now, and nothing failed: the job goes back to pending for
    ``delay`` (``backoff.snooze``), and no attempt is spent."""

    def __init__(self, delay: Duration, message: str = "snoozed") -> None:
        super().__init__(message)
        self.delay = as_interval(delay)
