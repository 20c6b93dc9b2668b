"""The values the SQL functions return, as typed Python objects.

Every field mirrors a column of a ``backoff.*`` function's result; nothing here
computes a delay or decides a retry (the database does, docs/concepts.md).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any, Literal

Status = Literal["pending", "running", "retrying", "completed", "dead_lettered", "cancelled", "blocked"]

#: Seconds (int or float) or a timedelta: every duration the package takes.
Duration = float | dt.timedelta


def as_interval(d: Duration) -> dt.timedelta:
    """A duration as the timedelta sent for an ``interval`` parameter."""
    return d if isinstance(d, dt.timedelta) else dt.timedelta(seconds=d)


def optional_interval(d: Duration | None) -> dt.timedelta | None:
    """as_interval, with None kept: the function's default."""
    return None if d is None else as_interval(d)


def as_seconds(d: Duration) -> float:
    """A duration in seconds, for the worker's own timers."""
    return d.total_seconds() if isinstance(d, dt.timedelta) else float(d)


@dataclass(frozen=True)
class AttemptError:
    """One entry of a job's error history (the 20 most recent are kept)."""

    #: The fencing token of the attempt that failed: unique per entry.
    attempt: int
    #: That attempt's place in the retry budget (0 in entries written
    #: before the budget was counted apart).
    counted: int
    #: When it failed; None if the entry's time cannot be read.
    at: dt.datetime | None
    error: str
    worker: str | None
    #: "error" (the handler's) or "lease_expired" (reaped).
    kind: str


@dataclass(frozen=True)
class Job:
    """A row of ``backoff.jobs`` as a claim, fail, snooze or replay returns it.

    Two numbers describe a job's attempts (docs/adr/0020):

    - ``attempt`` is the fencing token: ``backoff.jobs.attempts``, every claim
      of the job over its life, which never goes down. A claimed job's
      ``attempt`` is the token every call that settles or extends it carries;
      no other claim of the job ever has it.
    - ``counted_attempt`` is ``attempt - uncounted_attempts``: the attempt's
      place in the retry budget, what ``max_attempts`` bounds. A snooze and a
      replay give budget back, never a token.
    """

    id: int
    queue: str
    #: The payload, decoded from JSON.
    payload: Any
    status: Status
    priority: int
    #: The fencing token (``backoff.jobs.attempts``); see the class.
    attempt: int
    #: Claims that do not count against max_attempts (snoozes, replays).
    uncounted_attempts: int
    #: The job's own max_attempts; None: its policy's.
    max_attempts: int | None
    policy: str | None
    run_at: dt.datetime
    lease_until: dt.datetime | None
    locked_by: str | None
    last_attempted_at: dt.datetime | None
    last_failed_at: dt.datetime | None
    last_error: str | None
    errors: list[AttemptError] = field(repr=False)
    #: max_attempts, non_retryable, deadline or lease_expiries.
    dead_letter_reason: str | None
    dedupe_key: str | None
    created_at: dt.datetime
    completed_at: dt.datetime | None

    @property
    def counted_attempt(self) -> int:
        """The attempt's place in the retry budget: 1 on a first try (and on
        the first try after a replay); equal to max_attempts on the last."""
        return self.attempt - self.uncounted_attempts


@dataclass(frozen=True)
class NewJob:
    """A job for :meth:`Client.enqueue_many`; only ``queue`` is required."""

    queue: str
    #: Any JSON-serialisable value; None is ``{}``.
    payload: Any = None
    #: First run; None: now.
    run_at: dt.datetime | None = None
    #: None: the policy's.
    max_attempts: int | None = None
    #: Higher is claimed first.
    priority: int = 0
    #: While an unfinished job of the queue has this key, its id is returned
    #: and nothing is added.
    dedupe_key: str | None = None
    #: A row of backoff.policies; None: the queue's policy.
    policy: str | None = None


@dataclass(frozen=True)
class QueueStats:
    """One queue's row of ``backoff.stats``."""

    queue: str
    pending: int
    running: int
    retrying: int
    completed: int
    dead_lettered: int
    cancelled: int
    #: Pending or retrying jobs whose run_at has passed.
    due: int
    #: How long the oldest due job has waited; None when none is due.
    oldest_due_age: dt.timedelta | None
    #: Failed attempts followed by a retry, within the window.
    retries: int
    #: Jobs dead-lettered within the window.
    dead_letters: int
    #: Running jobs whose lease has ended: work a stopped worker stranded,
    #: until a reap settles it.
    expired: int
    #: Whether the queue is paused (backoff.pause_queue).
    paused: bool
    #: Jobs waiting for the jobs they depend on (docs/workflows.md).
    blocked: int


@dataclass(frozen=True)
class QueueState:
    """The live state of a queue's controls (``backoff.queue_state``)."""

    queue: str
    #: closed, open or half_open.
    state: str
    opened_at: dt.datetime | None
    failures: int
    probes_left: int | None
    rate: float | None
    burst: int | None
    tokens: float | None
    #: When a claim can next return a job; None when nothing holds it back
    #: (or the queue is paused, or a half-open breaker waits for a probe).
    next_claim_at: dt.datetime | None
    #: The time the state was read at (p_now, else the database's clock):
    #: wait ``next_claim_at - read_at``, whatever the local clock says.
    read_at: dt.datetime


@dataclass(frozen=True)
class ReplayOutcome:
    """What ``backoff.replay_dead_letters`` did with one dead letter."""

    job_id: int
    replayed: bool
    #: Why it was left dead-lettered (e.g. a dedupe key now held).
    reason: str | None


@dataclass(frozen=True)
class ScheduleFire:
    """One job ``backoff.fire_schedules`` enqueued for a due slot."""

    schedule: str
    #: The slot it fired for (the job's run_at).
    slot: dt.datetime
    job_id: int


@dataclass(frozen=True)
class JobDetail:
    """A job as an operator sees it (``backoff.job_detail``): the row and
    what governs it now."""

    job: Job
    #: The policy that governs the job (``backoff.job_policy``).
    effective_policy: str
    #: The job's max_attempts, else its policy's (0 when neither is known).
    effective_max_attempts: int


@dataclass(frozen=True)
class DeadLetterGroup:
    """The dead letters of one queue with one reason and one error signature
    (``backoff.dead_letter_groups``)."""

    queue: str
    #: '' for a dead letter without a reason.
    reason: str
    #: ``backoff.error_signature`` of the last error.
    signature: str
    count: int
    first_seen: dt.datetime
    last_seen: dt.datetime
    #: The last error of the group's newest job, unmasked.
    example: str
