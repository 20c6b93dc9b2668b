"""What a handler's return means for its job, read in one place.

The worker records the outcome with one fenced call (complete, fail,
snooze); the database decides the rest (retry or dead letter, the delay).
"""

from __future__ import annotations

import datetime as dt
import threading
import traceback
from dataclasses import dataclass
from typing import Any, Literal

from .errors import Cancelled, InvalidArgument, Permanent, RetryAfter, Snooze, WorkerShutdown
from .workflows import MAX_PROGRESS_BYTES, encode_json

Kind = Literal["completed", "failed", "permanent", "snoozed"]


@dataclass(frozen=True)
class Outcome:
    kind: Kind
    #: The error text fail records.
    error: str = ""
    #: The snooze delay, or the retry_in a RetryAfter asked for.
    delay: dt.timedelta | None = None
    #: For a completion: the output the handler set, as JSON text (None:
    #: none).
    output: str | None = None


def error_text(e: BaseException) -> str:
    """``Type: message`` of an exception, and of what it was raised from: a
    handler's ``raise Permanent("bad payload") from err`` records both."""
    text = "".join(traceback.format_exception_only(type(e), e)).strip()
    if isinstance(e, (Permanent, RetryAfter, Snooze)):
        text = str(e)
    cause = e.__cause__
    if cause is not None:
        text += ": " + "".join(traceback.format_exception_only(type(cause), cause)).strip()
    return text


def read_outcome(exc: BaseException | None, cause: Cancelled | None = None, output: str | None = None) -> Outcome:
    """None completes; Snooze snoozes; Permanent dead-letters; RetryAfter
    fails with its delay; any other exception fails with the policy's
    delay. A failure after the shutdown cancelled the handler is not the
    job's fault: it is handed back, due at once elsewhere (retry_in 0; the
    attempt, counted at claim, stays spent)."""
    if exc is None:
        return Outcome("completed", output=output)
    if isinstance(exc, Snooze):
        return Outcome("snoozed", error_text(exc), exc.delay)
    if isinstance(exc, Permanent):
        return Outcome("permanent", error_text(exc))
    if isinstance(cause, WorkerShutdown):
        return Outcome("failed", "worker shutdown: " + error_text(exc), dt.timedelta(0))
    if isinstance(exc, RetryAfter):
        return Outcome("failed", error_text(exc), exc.delay)
    return Outcome("failed", error_text(exc))


class Context:
    """What a running handler may ask: whether it should stop, and why; and
    what it may record: the job's output (set_output) and its progress
    (report_progress).

    ``cause`` is :class:`~pgbackoff.errors.LeaseLost` (the job is no longer
    this attempt's: stop, the result is dropped),
    :class:`~pgbackoff.errors.LeaseExpired` or
    :class:`~pgbackoff.errors.WorkerShutdown` (the grace period is over:
    return now; an exception hands the job back). A handler that goes on
    keeps its job: the worker extends the lease until it returns.
    """

    # One lock for every context: cancelling and waiting are rare, and a
    # context is made per job, so it holds no lock or event of its own until
    # a handler waits on it (creating them cost more than a no-op handler).
    _lock = threading.Lock()

    def __init__(self) -> None:
        self._event: threading.Event | None = None
        self._cause: Cancelled | None = None
        self._output: str | None = None
        self._progress: str | None = None

    def set_output(self, value: Any) -> None:
        """Record value (any JSON value; a RawJSON as it is) as the job's
        output: when the handler returns, the worker completes the job with
        it, and job_output and its dependents' parent_outputs read it. A
        later call replaces an earlier one. An output over the queue's
        max_output_bytes dead-letters the job, naming the refusal.
        InvalidArgument when value has no JSON form."""
        self._output = encode_json("set output", value)

    @property
    def output(self) -> str | None:
        """The output set so far, as JSON text; None: none."""
        return self._output

    def report_progress(self, value: Any) -> None:
        """Record value (any JSON value, at most 8 KiB) as the job's
        progress: the attempt's next heartbeat sends it (every heartbeat
        interval, a third of the lease by default), and backoff.job_detail
        and `backoffctl jobs show` display it. A later call replaces a
        progress not sent yet."""
        text = encode_json("report progress", value)
        size = len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_PROGRESS_BYTES:
            raise InvalidArgument("report progress", f"{size} bytes, over {MAX_PROGRESS_BYTES}")
        with Context._lock:
            self._progress = text

    def take_progress(self) -> str | None:
        """The progress reported since the last heartbeat, as JSON text,
        and forget it (the heartbeat's)."""
        with Context._lock:
            p, self._progress = self._progress, None
            return p

    @property
    def cancelled(self) -> bool:
        return self._cause is not None

    @property
    def cause(self) -> Cancelled | None:
        return self._cause

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep up to timeout seconds, ending early on cancellation; True
        when cancelled. (Blocking: for the threaded Worker's handlers.)"""
        with Context._lock:
            if self._cause is not None:
                return True
            if self._event is None:
                self._event = threading.Event()
            event = self._event
        return event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise the cause if the handler was asked to stop."""
        if self._cause is not None:
            raise self._cause

    def cancel(self, cause: Cancelled) -> bool:
        """Ask the handler to stop; the first cause stays. True if this
        call cancelled it."""
        with Context._lock:
            if self._cause is not None:
                return False
            self._cause = cause
            event = self._event
        if event is not None:
            event.set()
        return True
