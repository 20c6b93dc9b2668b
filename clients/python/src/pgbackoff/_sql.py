"""The calls: one ``backoff.*`` SQL function each, with its decoder.

Both clients, the blocking one and the asyncio one, run these: a
:class:`Call` is the statement, its parameters, the operation's name for
errors and how to read the rows. Every call names its arguments
(``p_queue => %s::text``), so it stays right when a function gains optional
parameters, and casts them, so no type depends on inference. Every call
that reads the clock passes ``p_now``: the client's clock when it has one,
else NULL, the database's clock, so many hosts agree on time.

Nothing here reads or writes ``backoff.jobs``: the database decides.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from psycopg.types.json import Jsonb

from .types import (
    AttemptError,
    DeadLetterGroup,
    Duration,
    Job,
    JobDetail,
    NewJob,
    QueueState,
    QueueStats,
    ReplayOutcome,
    ScheduleFire,
    Status,
    as_interval,
    optional_interval,
)
from .workflows import ParentOutput

T = TypeVar("T")
Rows = list[tuple[Any, ...]]

#: The channel backoff.enqueue notifies (payload: the queue) while a worker
#: waits for the queue (backoff.wait_for_jobs).
NOTIFY_CHANNEL = "backoff_jobs"

#: The schema version this package needs (sql/migrations).
REQUIRED_SCHEMA = 5


@dataclass(frozen=True)
class Call(Generic[T]):
    """One statement: a single call of a backoff.* function."""

    op: str
    sql: str
    params: tuple[Any, ...]
    decode: Callable[[Rows], T]


# The columns of backoff.jobs that Job reads, named so that a column a later
# migration adds changes nothing.
_JOB_COLUMNS = (
    "id, queue, payload, status, priority, attempts, uncounted_attempts, max_attempts, policy, run_at, "
    "lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors, "
    "dead_letter_reason, dedupe_key, created_at, completed_at"
)


def _history(raw: Any) -> list[AttemptError]:
    out: list[AttemptError] = []
    for e in raw if isinstance(raw, list) else []:
        if not isinstance(e, dict):
            continue
        at: dt.datetime | None = None
        try:
            at = dt.datetime.fromisoformat(str(e.get("at")))
        except ValueError:
            pass  # a history is for people: one odd entry must not hide the job
        out.append(
            AttemptError(
                attempt=int(e.get("attempt") or 0),
                counted=int(e.get("counted") or 0),
                at=at,
                error=str(e.get("error") or ""),
                worker=e.get("worker"),
                kind=str(e.get("kind") or ""),
            )
        )
    return out


def _job(r: Sequence[Any]) -> Job:
    return Job(
        id=r[0], queue=r[1], payload=r[2], status=r[3], priority=r[4], attempt=r[5],
        uncounted_attempts=r[6], max_attempts=r[7], policy=r[8], run_at=r[9], lease_until=r[10],
        locked_by=r[11], last_attempted_at=r[12], last_failed_at=r[13], last_error=r[14],
        errors=_history(r[15]), dead_letter_reason=r[16], dedupe_key=r[17], created_at=r[18],
        completed_at=r[19],
    )  # fmt: skip


# A claim's rows as one JSON array each: the pure-Python psycopg reads a
# cell at a time (a ctypes call and a loader each), so twenty cells a job
# were most of a busy worker's time; one cell decoded by the json module,
# with the timestamps read by datetime.fromisoformat, costs a tenth of it.
# JSON renders timestamptz in ISO 8601 with the session's offset: the same
# instant and offset psycopg's loader gives.
_JOB_ARRAY = f"pg_catalog.json_build_array({_JOB_COLUMNS})::text"
_JOB_TIMES = (9, 10, 12, 13, 18, 19)  # run_at, lease_until, last_attempted_at, last_failed_at, created_at, completed_at


def _job_from_json(cell: str) -> Job:
    r = json.loads(cell)
    for i in _JOB_TIMES:
        if r[i] is not None:
            r[i] = dt.datetime.fromisoformat(r[i])
    return _job(r)


def _jobs_from_json(rows: Rows) -> list[Job]:
    return [_job_from_json(r[0]) for r in rows]


def _one_job(rows: Rows) -> Job:
    return _job(rows[0])


def _jobs(rows: Rows) -> list[Job]:
    return [_job(r) for r in rows]


def _scalar(rows: Rows) -> Any:
    return rows[0][0]


def _ids(rows: Rows) -> list[int]:
    return [r[0] for r in rows]


def _job_call(op: str, fn: str, args: str, params: tuple[Any, ...]) -> Call[Job]:
    return Call(op, f"SELECT {_JOB_COLUMNS} FROM backoff.{fn}({args})", params, _one_job)


_MAX_ERROR_TEXT = 8192


def clean_error_text(s: str) -> str:
    """s as the database stores an error text: NUL and lone surrogates
    (which PostgreSQL text or UTF-8 cannot hold, and which would make the
    whole call fail) become U+FFFD, and a text over 8 KiB is cut, ending
    with " [truncated: N bytes]", so that a huge error does not travel."""
    b = s.encode("utf-8", "surrogatepass")
    if len(b) > _MAX_ERROR_TEXT:
        s = b[:8150].decode("utf-8", "ignore") + f" [truncated: {len(b)} bytes]"
    if "\x00" in s or any("\ud800" <= c <= "\udfff" for c in s):
        s = "".join("\ufffd" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in s)
    return s


def schema_version() -> Call[int | None]:
    return Call("check pgbackoff schema", "SELECT backoff.schema_version()", (), _scalar)


def enqueue(
    queue: str,
    payload: Any,
    *,
    run_at: dt.datetime | None,
    max_attempts: int | None,
    priority: int,
    dedupe_key: str | None,
    policy: str | None,
    now: dt.datetime | None,
) -> Call[int]:
    return Call(
        f'enqueue job in "{queue}"',
        "SELECT backoff.enqueue(p_queue => %s::text, p_payload => %s::jsonb, p_run_at => %s::timestamptz, "
        "p_max_attempts => %s::integer, p_priority => %s::integer, p_dedupe_key => %s::text, "
        "p_policy => %s::text, p_now => %s::timestamptz)",
        (queue, Jsonb({} if payload is None else payload), run_at, max_attempts, priority, dedupe_key, policy, now),
        _scalar,
    )


def enqueue_many(jobs: Sequence[NewJob], now: dt.datetime | None) -> Call[list[int]]:
    """The bulk form of backoff.enqueue: one statement, atomic, ids in
    input order, each job with exactly the single-job semantics. A column
    no job sets is sent as a NULL array (all NULL)."""

    def column(values: list[Any]) -> list[Any] | None:
        return values if any(v is not None for v in values) else None

    return Call(
        f"enqueue {len(jobs)} jobs",
        "SELECT id FROM backoff.enqueue(p_queues => %s::text[], p_payloads => %s::jsonb[], "
        "p_run_ats => %s::timestamptz[], p_max_attempts => %s::integer[], p_priorities => %s::integer[], "
        "p_dedupe_keys => %s::text[], p_policies => %s::text[], p_now => %s::timestamptz) AS t(id)",
        (
            [j.queue for j in jobs],
            [Jsonb({} if j.payload is None else j.payload) for j in jobs],
            column([j.run_at for j in jobs]),
            column([j.max_attempts for j in jobs]),
            column([j.priority or None for j in jobs]),
            column([j.dedupe_key for j in jobs]),
            column([j.policy for j in jobs]),
            now,
        ),
        _ids,
    )


def claim(queue: str, worker: str, limit: int, lease: Duration | None, now: dt.datetime | None) -> Call[list[Job]]:
    return Call(
        f'claim jobs in "{queue}"',
        f"SELECT {_JOB_ARRAY} FROM backoff.claim(p_queue => %s::text, p_worker => %s::text, "
        "p_limit => %s::integer, p_lease => %s::interval, p_now => %s::timestamptz)",
        (queue, worker, limit, optional_interval(lease), now),
        _jobs_from_json,
    )


def acquire(job_id: int, worker: str, lease: Duration | None, now: dt.datetime | None) -> Call[Job]:
    return _job_call(
        f"acquire job {job_id}",
        "acquire",
        "p_job_id => %s::bigint, p_worker => %s::text, p_lease => %s::interval, p_now => %s::timestamptz",
        (job_id, worker, optional_interval(lease), now),
    )


def complete(job_id: int, attempt: int, now: dt.datetime | None, output: str | None = None) -> Call[Job]:
    """output: the JSON text recorded as the job's output (None: none)."""
    if output is None:
        return _job_call(
            f"complete job {job_id} (attempt {attempt})",
            "complete",
            "p_job_id => %s::bigint, p_attempt => %s::integer, p_now => %s::timestamptz",
            (job_id, attempt, now),
        )
    return _job_call(
        f"complete job {job_id} (attempt {attempt})",
        "complete",
        "p_job_id => %s::bigint, p_attempt => %s::integer, p_now => %s::timestamptz, p_output => %s::jsonb",
        (job_id, attempt, now, output),
    )


def complete_many(
    job_ids: Sequence[int], attempts: Sequence[int], now: dt.datetime | None, outputs: Sequence[str | None] | None = None
) -> Call[list[int]]:
    """outputs: each job's output as JSON text, None for none; a batch
    without outputs is the call it always was."""
    if outputs is None or all(o is None for o in outputs):
        return Call(
            f"complete {len(job_ids)} jobs",
            "SELECT id FROM backoff.complete_many(p_job_ids => %s::bigint[], p_attempts => %s::integer[], "
            "p_now => %s::timestamptz) AS t(id)",
            (list(job_ids), list(attempts), now),
            _ids,
        )
    return Call(
        f"complete {len(job_ids)} jobs",
        "SELECT id FROM backoff.complete_many(p_job_ids => %s::bigint[], p_attempts => %s::integer[], "
        "p_now => %s::timestamptz, p_outputs => %s::text[]::jsonb[]) AS t(id)",
        (list(job_ids), list(attempts), now, list(outputs)),
        _ids,
    )


def completed_by(job_ids: Sequence[int], attempts: Sequence[int]) -> Call[list[int]]:
    """Which of these (job, attempt) tokens completed their job: a job
    completed with attempts equal to the token was completed by that
    attempt and no other, since a token never repeats (docs/adr/0020).
    Through backoff.job, which applies the caller's queue scope."""
    return Call(
        f"check {len(job_ids)} completions",
        "SELECT j.id FROM unnest(%s::bigint[], %s::integer[]) AS t(id, attempt) "
        "CROSS JOIN LATERAL backoff.job(p_job_id => t.id) AS j "
        "WHERE j.attempts = t.attempt AND j.status = 'completed'",
        (list(job_ids), list(attempts)),
        _ids,
    )


def fail(
    job_id: int,
    attempt: int,
    error: str,
    *,
    retry_in: Duration | None,
    retryable: bool,
    now: dt.datetime | None,
) -> Call[Job]:
    return _job_call(
        f"fail job {job_id} (attempt {attempt})",
        "fail",
        "p_job_id => %s::bigint, p_attempt => %s::integer, p_error => %s::text, p_retry_in => %s::interval, "
        "p_retryable => %s::boolean, p_now => %s::timestamptz",
        (job_id, attempt, clean_error_text(error), optional_interval(retry_in), retryable, now),
    )


def heartbeat(
    job_id: int, attempt: int, extend: Duration | None, now: dt.datetime | None, progress: str | None = None
) -> Call[dt.datetime]:
    """progress: the JSON text recorded as the job's progress (None: the
    call as it always was)."""
    if progress is None:
        return Call(
            f"heartbeat job {job_id} (attempt {attempt})",
            "SELECT backoff.heartbeat(p_job_id => %s::bigint, p_attempt => %s::integer, p_extend => %s::interval, "
            "p_now => %s::timestamptz)",
            (job_id, attempt, optional_interval(extend), now),
            _scalar,
        )
    return Call(
        f"heartbeat job {job_id} (attempt {attempt})",
        "SELECT backoff.heartbeat(p_job_id => %s::bigint, p_attempt => %s::integer, p_extend => %s::interval, "
        "p_now => %s::timestamptz, p_progress => %s::jsonb)",
        (job_id, attempt, optional_interval(extend), now, progress),
        _scalar,
    )


def snooze(job_id: int, attempt: int, delay: Duration, now: dt.datetime | None) -> Call[Job]:
    return _job_call(
        f"snooze job {job_id} (attempt {attempt})",
        "snooze",
        "p_job_id => %s::bigint, p_attempt => %s::integer, p_delay => %s::interval, p_now => %s::timestamptz",
        (job_id, attempt, as_interval(delay), now),
    )


def cancel(job_id: int, reason: str | None, now: dt.datetime | None) -> Call[Job]:
    return _job_call(
        f"cancel job {job_id}",
        "cancel",
        "p_job_id => %s::bigint, p_reason => %s::text, p_now => %s::timestamptz",
        (job_id, None if reason is None else clean_error_text(reason), now),
    )


def replay(job_id: int, now: dt.datetime | None) -> Call[Job]:
    return _job_call(f"replay job {job_id}", "replay", "p_job_id => %s::bigint, p_now => %s::timestamptz", (job_id, now))


def replay_dead_letters(queue: str, now: dt.datetime | None) -> Call[list[ReplayOutcome]]:
    return Call(
        f'replay dead letters of queue "{queue}"',
        "SELECT job_id, replayed, reason FROM backoff.replay_dead_letters(p_queue => %s::text, p_now => %s::timestamptz)",
        (queue, now),
        lambda rows: [ReplayOutcome(job_id=r[0], replayed=r[1], reason=r[2]) for r in rows],
    )


def reap(limit: int | None, now: dt.datetime | None) -> Call[int]:
    return Call(
        "reap expired leases",
        "SELECT backoff.reap(p_limit => %s::integer, p_now => %s::timestamptz)"
        if limit is not None
        else "SELECT backoff.reap(p_now => %s::timestamptz)",
        (limit, now) if limit is not None else (now,),
        _scalar,
    )


def rotate(now: dt.datetime | None, worker: str | None = None) -> Call[int]:
    # One row per database (per shard through a router): the rows moved.
    # A worker that names itself counts as seen (backoff.liveness,
    # docs/adr/0079).
    if worker is None:
        return Call(
            "rotate the job segments",
            "SELECT coalesce(sum(moved), 0)::bigint FROM backoff.rotate(p_now => %s::timestamptz)",
            (now,),
            _scalar,
        )
    return Call(
        "rotate the job segments",
        "SELECT coalesce(sum(moved), 0)::bigint FROM backoff.rotate(p_now => %s::timestamptz, p_worker => %s::text)",
        (now, worker),
        _scalar,
    )


def fire_schedules(limit: int | None, now: dt.datetime | None) -> Call[list[ScheduleFire]]:
    """Enqueue the jobs of every schedule slot due now (docs/schedules.md):
    safe from any number of callers, a slot is enqueued once; with nothing
    due, one index probe."""
    return Call(
        "fire schedules",
        "SELECT schedule, slot, job_id FROM backoff.fire_schedules(p_limit => %s::integer, p_now => %s::timestamptz)"
        if limit is not None
        else "SELECT schedule, slot, job_id FROM backoff.fire_schedules(p_now => %s::timestamptz)",
        (limit, now) if limit is not None else (now,),
        lambda rows: [ScheduleFire(schedule=r[0], slot=r[1], job_id=r[2]) for r in rows],
    )


def prune(older_than: Duration, limit: int | None, now: dt.datetime | None) -> Call[int]:
    if limit is None:
        return Call(
            "prune finished jobs",
            "SELECT backoff.prune(p_older_than => %s::interval, p_now => %s::timestamptz)",
            (as_interval(older_than), now),
            _scalar,
        )
    return Call(
        "prune finished jobs",
        "SELECT backoff.prune(p_older_than => %s::interval, p_limit => %s::integer, p_now => %s::timestamptz)",
        (as_interval(older_than), limit, now),
        _scalar,
    )


def stats(window: Duration | None, now: dt.datetime | None) -> Call[list[QueueStats]]:
    cols = (
        "queue, pending, running, retrying, completed, dead_lettered, cancelled, due, oldest_due_age, retries, dead_letters, "
        "expired, paused, blocked"
    )
    params: tuple[Any, ...]
    if window is None:
        sql, params = f"SELECT {cols} FROM backoff.stats(p_now => %s::timestamptz)", (now,)
    else:
        sql = f"SELECT {cols} FROM backoff.stats(p_window => %s::interval, p_now => %s::timestamptz)"
        params = (as_interval(window), now)
    return Call("read job stats", sql, params, lambda rows: [QueueStats(*r) for r in rows])


def queue_state(queue: str, now: dt.datetime | None) -> Call[QueueState]:
    # The time the state was read at comes back beside it: a worker waits
    # next_claim_at minus that, on the database's clock, not its own.
    return Call(
        f'read state of queue "{queue}"',
        "SELECT queue, state, opened_at, failures, probes_left, rate, burst, tokens, next_claim_at, "
        "coalesce(%s::timestamptz, now()) FROM backoff.queue_state(p_queue => %s::text, p_now => %s::timestamptz)",
        (now, queue, now),
        lambda rows: QueueState(*rows[0]),
    )


def pause_queue(queue: str) -> Call[bool]:
    return Call(f'pause queue "{queue}"', "SELECT backoff.pause_queue(p_queue => %s::text)", (queue,), _scalar)


def resume_queue(queue: str) -> Call[bool]:
    return Call(f'resume queue "{queue}"', "SELECT backoff.resume_queue(p_queue => %s::text)", (queue,), _scalar)


def wait_for_jobs(queue: str, worker: str, ttl: Duration) -> Call[dt.datetime]:
    return Call(
        f'register waiting on "{queue}"',
        "SELECT backoff.wait_for_jobs(p_queue => %s::text, p_worker => %s::text, p_ttl => %s::interval)",
        (queue, worker, as_interval(ttl)),
        _scalar,
    )


def next_work(
    queues: Sequence[str], worker: str | None, ttl: Duration | None, now: dt.datetime | None
) -> Call[list[tuple[str, str, bool]]]:
    """The idle worker's one look (docs/adr/0083): (kind, queue, due) for
    each kind of work, due decided against the time the look used (the
    client's clock when it has one, else the database's), so that a skew
    between the two delays nothing."""
    return Call(
        f"look for work in {len(queues)} idle queues",
        "SELECT kind, coalesce(queue, ''), coalesce(at <= coalesce(%s::timestamptz, statement_timestamp()), false) "
        "FROM backoff.next_work(p_queues => %s::text[], p_worker => %s::text, p_ttl => %s::interval, p_now => %s::timestamptz)",
        (now, list(queues), worker, None if ttl is None else as_interval(ttl), now),
        lambda rows: [(r[0], r[1], r[2]) for r in rows],
    )


def stop_waiting(queue: str, worker: str) -> Call[bool]:
    return Call(
        f'stop waiting on "{queue}"',
        "SELECT backoff.stop_waiting(p_queue => %s::text, p_worker => %s::text)",
        (queue, worker),
        _scalar,
    )


# Workflows (docs/workflows.md).


def enqueue_graph(count: int, jobs: str, now: dt.datetime | None) -> Call[dict[str, int]]:
    """backoff.enqueue_graph: jobs is its p_jobs as JSON text; each job's
    id by its ref."""
    return Call(
        f"enqueue a graph of {count} jobs",
        "SELECT ref, job_id FROM backoff.enqueue_graph(p_jobs => %s::jsonb, p_now => %s::timestamptz)",
        (jobs, now),
        lambda rows: {r[0]: r[1] for r in rows},
    )


def job_output(job_id: int) -> Call[Any]:
    return Call(
        f"read the output of job {job_id}",
        "SELECT backoff.job_output(p_job_id => %s::bigint)",
        (job_id,),
        _scalar,
    )


def parent_outputs(job_id: int) -> Call[list[ParentOutput]]:
    return Call(
        f"read the parents of job {job_id}",
        "SELECT parent_id, queue, status, on_failure, output FROM backoff.parent_outputs(p_job_id => %s::bigint)",
        (job_id,),
        lambda rows: [ParentOutput(parent_id=r[0], queue=r[1], status=r[2], on_failure=r[3], output=r[4]) for r in rows],
    )


#: The channel a call that finishes an awaited job notifies, with its id
#: (backoff.await_job).
FINISHED_CHANNEL = "backoff_finished"


def await_job(job_id: int, awaiter: str, ttl: Duration) -> Call[Status]:
    """Register that awaiter waits for the job to finish; its status now."""
    return Call(
        f"wait for the output of job {job_id}",
        "SELECT backoff.await_job(p_job_id => %s::bigint, p_awaiter => %s::text, p_ttl => %s::interval)",
        (job_id, awaiter, as_interval(ttl)),
        _scalar,
    )


def stop_awaiting(job_id: int, awaiter: str) -> Call[bool]:
    return Call(
        f"stop waiting for job {job_id}",
        "SELECT backoff.stop_awaiting(p_job_id => %s::bigint, p_awaiter => %s::text)",
        (job_id, awaiter),
        _scalar,
    )


# The operator's reads (docs/adr/0072): admin only.


def list_jobs(
    queue: str | None,
    statuses: Sequence[str] | None,
    dead_letter_reason: str | None,
    order: str,
    after_id: int | None,
    after_completed_at: dt.datetime | None,
    limit: int,
    payloads: bool,
) -> Call[list[Job]]:
    return Call(
        "list jobs",
        f"SELECT {_JOB_COLUMNS} FROM backoff.list_jobs(p_queue => %s::text, p_statuses => %s::text[], "
        "p_dead_letter_reason => %s::text, p_order => %s::text, p_after_id => %s::bigint, "
        "p_after_completed_at => %s::timestamptz, p_limit => %s::integer, p_payloads => %s::boolean)",
        (queue, None if statuses is None else list(statuses), dead_letter_reason, order, after_id, after_completed_at, limit, payloads),
        _jobs,
    )


def job_detail(job_id: int) -> Call[JobDetail | None]:
    return Call(
        f"show job {job_id}",
        f"SELECT {_JOB_COLUMNS}, effective_policy, effective_max_attempts FROM backoff.job_detail(p_job_id => %s::bigint)",
        (job_id,),
        lambda rows: JobDetail(_job(rows[0][:20]), rows[0][20], rows[0][21]) if rows else None,
    )


def dead_letter_groups(queue: str | None, limit: int) -> Call[list[DeadLetterGroup]]:
    return Call(
        "group dead letters",
        "SELECT queue, reason, signature, count, first_seen, last_seen, example "
        "FROM backoff.dead_letter_groups(p_queue => %s::text, p_limit => %s::integer)",
        (queue, limit),
        lambda rows: [DeadLetterGroup(*r) for r in rows],
    )
