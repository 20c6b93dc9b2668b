"""How a worker records what its handlers did: the decisions and log lines
the threaded and the asyncio Worker share, without I/O. Each Worker makes
the calls its own way (a thread blocks, a task awaits); what a result
means, and what is logged about it, is written here once.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence

from ._outcome import Outcome, read_outcome
from .errors import Cancelled, InvalidTransition, JobNotFound, LeaseLost, StaleAttempt
from .types import Job, ScheduleFire

log = logging.getLogger("pgbackoff")

#: A completion waiting for the completer: job id, attempt, queue, output
#: (JSON text of at most BATCHED_OUTPUT_BYTES, or None).
Completion = tuple[int, int, str, str | None]

#: An output whose JSON text is at most this long rides the batch: as
#: jsonb it stays under 1 KiB (a value's binary form takes at most about
#: five times its shortest text), the smallest max_output_bytes a queue may
#: have, so it cannot be refused and fail the whole batch. A larger one is
#: completed by a call of its own, as the Go Worker does.
BATCHED_OUTPUT_BYTES = 128


def batched(o: Outcome) -> bool:
    """Whether a completion rides the completer's batch."""
    return o.output is None or len(o.output.encode("utf-8", "surrogatepass")) <= BATCHED_OUTPUT_BYTES


def batch_outputs(batch: Sequence[Completion]) -> list[str | None] | None:
    """The outputs of a batch for complete_many; None when it has none."""
    return [c[3] for c in batch] if any(c[3] is not None for c in batch) else None


def output_refused(e: BaseException) -> str:
    """The error a job is dead-lettered with when its output was refused
    (over the queue's max_output_bytes): the job stays running, and another
    attempt would produce the same output, so it is failed at once instead
    of waiting for the reaper."""
    return f"output refused: {e}"


def is_lost(e: BaseException) -> bool:
    """The database says the attempt no longer holds the job."""
    return isinstance(e, (StaleAttempt, InvalidTransition, JobNotFound))


def attempt_outcome(job: Job, exc: BaseException | None, cause: Cancelled | None, output: str | None = None) -> Outcome | None:
    """What to record for an attempt whose handler returned (exc None) or
    raised; None when its lease was lost: the job is no longer the
    attempt's, so its result is dropped."""
    if isinstance(cause, LeaseLost):
        log.warning("job %d attempt %d finished after its lease was lost; result dropped", job.id, job.attempt)
        return None
    if exc is not None:
        log.info("job %d attempt %d raised", job.id, job.attempt, exc_info=exc)
    return read_outcome(exc, cause, output)


def snooze_delay(o: Outcome) -> dt.timedelta:
    return o.delay if o.delay is not None else dt.timedelta(0)


def failed(job: Job, o: Outcome, now: Job) -> None:
    """Log a recorded failure with what the database decided."""
    log.info("job %d attempt %d failed: %s; now %s, run at %s", job.id, job.attempt, o.error, now.status, now.run_at)


def not_recorded(job: Job, o: Outcome, e: Exception) -> None:
    """Log an outcome the database did not take."""
    if is_lost(e):
        log.warning("job %d is no longer attempt %d's; outcome %s dropped: %s", job.id, job.attempt, o.kind, e)
    else:
        log.error("could not record job %d's outcome %s; the reaper will retry it: %s", job.id, o.kind, e)


def ids_and_attempts(pairs: Sequence[tuple[int, int]] | Sequence[Completion]) -> tuple[list[int], list[int]]:
    """The arguments of complete_many and completed_by."""
    return [p[0] for p in pairs], [p[1] for p in pairs]


def confirm_failed(refused: Sequence[tuple[int, int]], e: Exception) -> set[int]:
    """A failed confirmation: the refusals stand."""
    log.warning("could not check whether %d refused completions were made by a call whose reply was lost: %s", len(refused), e)
    return set()


def confirmed(mine: set[int]) -> set[int]:
    if mine:
        log.info("%d completions confirmed: the reply of an earlier call was lost", len(mine))
    return mine


def refusals(batch: Sequence[Completion], done: set[int]) -> list[tuple[int, int]]:
    """The completions of a batch that were refused, to confirm."""
    return [(b[0], b[1]) for b in batch if b[0] not in done]


def settled_queues(batch: Sequence[Completion], done: set[int]) -> set[str]:
    """The queues with completions made (their producers are told: a
    half-open breaker's probe may have closed it); each refusal is
    logged."""
    queues = set()
    for job_id, attempt, queue, _ in batch:
        if job_id in done:
            queues.add(queue)
        else:
            log.warning("completion of job %d refused: attempt %d no longer holds it", job_id, attempt)
    return queues


def lease_left(until: dt.datetime, clock: dt.datetime | None) -> float:
    """Seconds from the clock (None: now) to a heartbeat's new lease end."""
    return (until - (clock or dt.datetime.now(dt.timezone.utc))).total_seconds()


def reaped(n: int) -> bool:
    """Log a reap; whether the producers should look again."""
    if n:
        log.info("reaped %d expired leases", n)
    return n > 0


def fired(schedules: list[ScheduleFire]) -> bool:
    """Log fired schedules; whether the producers should look again (a
    slot is due at once; without LISTEN nothing else tells the producers
    before their next poll)."""
    for f in schedules:
        log.debug("fired schedule %s for slot %s: job %d", f.schedule, f.slot, f.job_id)
    return bool(schedules)
