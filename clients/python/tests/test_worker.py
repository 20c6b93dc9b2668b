"""The threaded Worker against a real PostgreSQL: outcomes, heartbeats,
shutdown, wake-ups."""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from conftest import FakeClock, eventually, job_row
from psycopg_pool import ConnectionPool

import pgbackoff
from pgbackoff import Client, Context, Job, NewJob, Queue, Worker


@contextmanager
def running(worker: Worker) -> Iterator[threading.Thread]:
    """Run the worker in a thread; stop it and wait for run() at the end."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            worker.run()
        except BaseException as e:  # reported to the test below
            errors.append(e)

    t = threading.Thread(target=run)
    t.start()
    try:
        yield t
    finally:
        worker.stop()
        t.join(30)
        assert not t.is_alive(), "run() did not return"
    assert not errors, errors


def statuses(conn: psycopg.Connection[Any], queue: str) -> dict[str, int]:
    rows = conn.execute("SELECT status, count(*) FROM backoff.jobs WHERE queue = %s GROUP BY status", (queue,))
    return {s: n for s, n in rows.fetchall()}


def test_outcomes(pool: ConnectionPool, client: Client, conn: psycopg.Connection[Any]) -> None:
    """Returning completes; Permanent dead-letters; RetryAfter retries after
    its delay; Snooze puts back without spending an attempt; any other
    exception retries under the policy; every outcome reaches the database."""
    seen: dict[int, list[int]] = {}
    lock = threading.Lock()

    def handle(job: Job, ctx: Context) -> None:
        n = job.payload["n"]
        with lock:
            seen.setdefault(n, []).append(job.counted_attempt)
        if n == 7:
            raise pgbackoff.Permanent("payload 7 is malformed") from ValueError("no 'to'")
        if n % 5 == 0 and job.attempt == 1:
            raise pgbackoff.RetryAfter("downstream said 429", 0)
        if n % 6 == 0 and job.attempt == 1:
            raise pgbackoff.Snooze(0)
        if n == 11:
            raise RuntimeError("connection reset")

    ids = client.enqueue_many([NewJob("py", {"n": n}) for n in range(1, 21)])
    worker = Worker(pool, [Queue("py", handle, concurrency=4)], poll_interval=0.05, now=client.now)
    with running(worker):
        eventually(lambda: statuses(conn, "py").get("completed", 0) == 18, what="18 completions")

    st = statuses(conn, "py")
    assert st == {"completed": 18, "dead_lettered": 1, "retrying": 1}, st
    dead = job_row(conn, ids[6])
    assert dead["dead_letter_reason"] == "non_retryable"
    assert dead["last_error"] == "payload 7 is malformed: ValueError: no 'to'"
    assert job_row(conn, ids[10])["last_error"] == "RuntimeError: connection reset"
    assert job_row(conn, ids[10])["run_at"] > client.now(), "retried under the policy's delay"
    assert seen[5] == [1, 2], "a RetryAfter spends the attempt"
    assert seen[6] == [1, 1], "a Snooze gives the attempt back"
    assert job_row(conn, ids[5])["attempts"] == 2, "the token still grows"


def test_completions_are_batched(pool: ConnectionPool, client: Client, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    client.enqueue_many([NewJob("batch", {"n": n}) for n in range(50)])
    worker = Worker(pool, [Queue("batch", lambda job, ctx: None, concurrency=8)], poll_interval=0.05)
    batches: list[int] = []
    complete_many = worker.client.complete_many

    def spy(ids: Any, attempts: Any) -> list[int]:
        batches.append(len(ids))
        return complete_many(ids, attempts)

    def no_single_complete(*args: Any) -> Any:
        raise AssertionError("a completion went around the completer")

    monkeypatch.setattr(worker.client, "complete_many", spy)
    monkeypatch.setattr(worker.client, "complete", no_single_complete)
    with running(worker):
        eventually(lambda: statuses(conn, "batch").get("completed", 0) == 50, what="50 completions")
    assert sum(batches) == 50


def test_heartbeat_keeps_the_lease_past_its_end(pool: ConnectionPool, client: Client, clock: FakeClock, conn: psycopg.Connection[Any]) -> None:
    """The clock is the test's: the lease ends 30 s after the claim, the
    heartbeats (every 50 ms of real time) extend it from the clock's time,
    and a reap after the first lease's end finds nothing to reap."""
    job_id = client.enqueue("long")
    release = threading.Event()
    started = threading.Event()

    def handle(job: Job, ctx: Context) -> None:
        started.set()
        release.wait(30)

    worker = Worker(
        pool, [Queue("long", handle, lease=30, heartbeat_interval=0.05)], reap_interval=None, listen=False, now=clock
    )
    with running(worker):
        assert started.wait(10)
        claimed_at = clock()
        assert job_row(conn, job_id)["lease_until"] == claimed_at + dt.timedelta(seconds=30)
        clock.advance(25)
        eventually(
            lambda: job_row(conn, job_id)["lease_until"] == claimed_at + dt.timedelta(seconds=55),
            what="a heartbeat at the clock's new time",
        )
        clock.advance(20)  # 45 s after the claim: past the first lease's end
        assert client.reap() == 0
        row = job_row(conn, job_id)
        assert (row["status"], row["attempts"]) == ("running", 1)
        release.set()
        eventually(lambda: job_row(conn, job_id)["status"] == "completed", what="completion")


def test_lease_lost_cancels_the_handler(pool: ConnectionPool, client: Client, conn: psycopg.Connection[Any]) -> None:
    job_id = client.enqueue("lost")
    causes: list[BaseException | None] = []
    started = threading.Event()

    def handle(job: Job, ctx: Context) -> None:
        started.set()
        ctx.wait(30)
        causes.append(ctx.cause)

    worker = Worker(pool, [Queue("lost", handle, heartbeat_interval=0.05)], poll_interval=0.05)
    with running(worker):
        assert started.wait(10)
        client.cancel(job_id, "operator")
        eventually(lambda: bool(causes), what="the handler to be cancelled")
    assert isinstance(causes[0], pgbackoff.LeaseLost)
    assert job_row(conn, job_id)["status"] == "cancelled", "the dropped result changed nothing"


def test_shutdown_hands_back_a_running_job(pool: ConnectionPool, client: Client, conn: psycopg.Connection[Any]) -> None:
    """A handler still running when the grace period ends is cancelled; its
    exception hands the job back, due at once elsewhere."""
    job_id = client.enqueue("stop")
    started = threading.Event()
    causes: list[BaseException | None] = []

    def handle(job: Job, ctx: Context) -> None:
        started.set()
        assert ctx.wait(30), "cancelled by the shutdown"
        causes.append(ctx.cause)
        ctx.raise_if_cancelled()

    worker = Worker(pool, [Queue("stop", handle)], shutdown_timeout=0.2, now=client.now)
    with running(worker):
        assert started.wait(10)
    assert isinstance(causes[0], pgbackoff.WorkerShutdown)
    row = job_row(conn, job_id)
    assert row["status"] == "retrying"
    assert row["run_at"] == client.now(), "due at once"
    assert row["last_error"].startswith("worker shutdown: ")
    (again,) = client.claim("stop")
    assert again.attempt == 2


def test_shutdown_waits_for_a_handler_that_ignores_it(pool: ConnectionPool, client: Client, conn: psycopg.Connection[Any]) -> None:
    """A handler that ignores the cancellation keeps its job: run() does
    not return before it, and the job is completed, never run elsewhere."""
    job_id = client.enqueue("stubborn")
    started, release = threading.Event(), threading.Event()

    def handle(job: Job, ctx: Context) -> None:
        started.set()
        release.wait(30)

    worker = Worker(pool, [Queue("stubborn", handle, heartbeat_interval=0.05)], shutdown_timeout=0.05)
    with running(worker) as t:
        assert started.wait(10)
        worker.stop()
        t.join(0.5)
        assert t.is_alive(), "run() returned while a handler still runs"
        assert job_row(conn, job_id)["status"] == "running"
        release.set()
    assert job_row(conn, job_id)["status"] == "completed"


def test_a_wake_up_arrives_through_listen(pool: ConnectionPool, client: Client, conn: psycopg.Connection[Any]) -> None:
    """With an hour's poll, only a notification can start the job: the
    idle worker registers (backoff.wait_for_jobs), enqueue notifies."""
    ran = threading.Event()
    worker = Worker(pool, [Queue("wake", lambda job, ctx: ran.set())], poll_interval=3600)
    with running(worker):
        eventually(
            lambda: conn.execute("SELECT count(*) FROM backoff.waiting_workers WHERE queue = 'wake'").fetchone() == (1,),
            what="the worker's registration",
        )
        client.enqueue("wake", {"hello": "wörld"})
        assert ran.wait(10), "the notification did not wake the worker"
    assert conn.execute("SELECT count(*) FROM backoff.waiting_workers").fetchone() == (0,), "unregistered at shutdown"


def test_a_pool_too_small_is_refused(pool: ConnectionPool) -> None:
    with pytest.raises(pgbackoff.InvalidArgument, match="needs at least 12"):
        Worker(pool, [Queue(f"q{i}", lambda job, ctx: None) for i in range(9)])
    with pytest.raises(pgbackoff.InvalidArgument, match="twice"):
        Worker(pool, [Queue("q", lambda job, ctx: None), Queue("q", lambda job, ctx: None)])
    with pytest.raises(pgbackoff.InvalidArgument, match="shorter than the lease"):
        Worker(pool, [Queue("q", lambda job, ctx: None, lease=10, heartbeat_interval=10)])


def lost_reply(real: Any) -> Any:
    """A call whose first run takes effect but whose reply is lost: the
    connection fails after the statement committed."""
    calls = 0

    def call(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        result = real(*args)
        if calls == 1:
            raise psycopg.OperationalError("server closed the connection unexpectedly")
        return result

    return call


def test_a_completion_whose_reply_was_lost_is_confirmed(
    pool: ConnectionPool, client: Client, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The repeat of a completion whose reply was lost is refused (the job
    is completed); backoff.job tells that this very attempt completed it,
    so it is counted as a completion, not logged as a refusal, both in a
    batch and alone."""
    client = Client(pool)  # the worker's clock: the database's
    client.enqueue_many([NewJob("lost", {"n": n}) for n in range(2)])
    worker = Worker(pool, [Queue("lost", lambda job, ctx: None)], poll_interval=0.05)
    batched, alone = client.claim("lost", 2)
    monkeypatch.setattr(worker.client, "complete_many", lost_reply(worker.client.complete_many))
    monkeypatch.setattr(worker.client, "complete", lost_reply(worker.client.complete))
    caplog.set_level("INFO", logger="pgbackoff")

    worker._flush([(batched.id, batched.attempt, "lost", None)])
    worker._complete_one(alone)  # raised InvalidTransition before the check

    assert job_row(conn, batched.id)["status"] == "completed"
    assert job_row(conn, alone.id)["status"] == "completed"
    assert not [r for r in caplog.records if "refused" in r.getMessage()], caplog.text
    assert [r.getMessage() for r in caplog.records if "confirmed" in r.getMessage()] == [
        "1 completions confirmed: the reply of an earlier call was lost"
    ] * 2


def test_a_refused_completion_stays_refused(
    pool: ConnectionPool, client: Client, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The check confirms only what the attempt did: a completion refused
    because another attempt holds the job stays a refusal."""
    client = Client(pool)
    client.enqueue("stale", {})
    (old,) = client.claim("stale", 1)
    client.fail(old.id, old.attempt, "crash", retry_in=0)
    (new,) = client.claim("stale", 1)
    worker = Worker(pool, [Queue("stale", lambda job, ctx: None)], poll_interval=0.05)
    monkeypatch.setattr(worker.client, "complete_many", lost_reply(worker.client.complete_many))
    caplog.set_level("INFO", logger="pgbackoff")

    worker._flush([(old.id, old.attempt, "stale", None)])

    assert job_row(conn, new.id)["status"] == "running"
    assert [r for r in caplog.records if "refused" in r.getMessage()], caplog.text
    assert not [r for r in caplog.records if "confirmed" in r.getMessage()], caplog.text


def put_due_schedule(conn: psycopg.Connection[Any], name: str, queue: str, clock: FakeClock) -> None:
    """A schedule every hour from 90 minutes before the clock's now (its
    anchor): the slot 30 minutes ago is due and its interval has not ended,
    so catch_up 'latest' fires it; the one before ended 30 minutes ago,
    more than max_clock_skew, and is passed over."""
    conn.execute(
        "SELECT backoff.put_schedule(%s, %s, p_every => '1 hour', p_anchor => %s, "
        "p_payload => '{\"from\": \"schedule\"}', p_now => %s)",
        (name, queue, clock() - dt.timedelta(minutes=90), clock() - dt.timedelta(minutes=90)),
    )


def scheduled_jobs(conn: psycopg.Connection[Any], name: str) -> list[tuple[str, dt.datetime | None, str]]:
    rows = conn.execute(
        "SELECT schedule, schedule_slot, status::text FROM backoff.jobs WHERE schedule = %s ORDER BY id", (name,)
    )
    return rows.fetchall()


def test_worker_fires_due_schedules(pool: ConnectionPool, clock: FakeClock, conn: psycopg.Connection[Any]) -> None:
    """The maintenance loop fires a due slot at start (no interval waited)
    and the worker runs the slot's job; the slot is the latest one due at
    the clock's now (the worker passes it as p_now)."""
    put_due_schedule(conn, "tick", "ticks", clock)
    ran: list[Job] = []

    def handle(job: Job, ctx: Context) -> None:
        ran.append(job)

    worker = Worker(pool, [Queue("ticks", handle)], poll_interval=0.05, schedule_interval=3600, listen=False, now=clock)
    with running(worker):
        eventually(lambda: [j[2] for j in scheduled_jobs(conn, "tick")] == ["completed"], what="the slot's job completed")
    ((name, slot, _),) = scheduled_jobs(conn, "tick")
    assert slot is not None and clock() - dt.timedelta(hours=1) < slot <= clock(), (slot, clock())
    assert [j.payload for j in ran] == [{"from": "schedule"}]


def test_worker_with_schedules_off_fires_nothing(pool: ConnectionPool, clock: FakeClock, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """schedule_interval=None: the maintenance loop looks (and would reap)
    but never fires, though its looks see the slot due (a fire would come
    first, at start, before the first look)."""
    put_due_schedule(conn, "tick", "ticks", clock)
    worker = Worker(pool, [Queue("ticks", lambda job, ctx: None)], poll_interval=0.02, reap_interval=0.02, schedule_interval=None, listen=False, now=clock)
    counts = idle_calls(monkeypatch, worker.client)
    with running(worker):
        eventually(lambda: counts["next_work"] >= 2, what="two looks")
    assert counts["fire_schedules"] == 0
    assert scheduled_jobs(conn, "tick") == []
    assert pgbackoff.Client(pool, now=clock).fire_schedules()[0].schedule == "tick", "the slot was due all along"


#: The calls an idle worker could send, counted by idle_calls.
IDLE_CALLS = ("claim", "queue_state", "next_work", "reap", "rotate", "fire_schedules", "wait_for_jobs")


def idle_calls(monkeypatch: pytest.MonkeyPatch, client: Any) -> dict[str, int]:
    """Count the worker's client calls by name (Client or AsyncClient)."""
    counts = {n: 0 for n in IDLE_CALLS}
    for name in IDLE_CALLS:
        call = getattr(client, name)

        def counted(*args: Any, _name: str = name, _call: Any = call, **kwargs: Any) -> Any:
            counts[_name] += 1
            return _call(*args, **kwargs)

        monkeypatch.setattr(client, name, counted)
    return counts


def test_an_idle_worker_looks_once_for_all_its_queues(
    pool: ConnectionPool, clock: FakeClock, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/adr/0083: drained queues park, and one backoff.next_work a poll
    interval stands for their claims and state reads: no claim, no
    queue_state, at most 2 calls a look. A job due later is not claimed
    before the clock reaches it, and the first look after starts it."""
    queues = [f"idle-{i}" for i in range(5)]
    worker = Worker(pool, [Queue(q, lambda job, ctx: None, concurrency=1) for q in queues], poll_interval=0.05, now=clock)
    counts = idle_calls(monkeypatch, worker.client)
    with running(worker):
        eventually(lambda: worker.listening, what="listening")
        eventually(lambda: all(p.parked for p in worker.producers), what="every producer parked")
        settled = counts["next_work"]
        eventually(lambda: counts["next_work"] >= settled + 2, what="two looks")
        before = dict(counts)
        eventually(lambda: counts["next_work"] >= before["next_work"] + 20, what="20 looks")
        during = {n: counts[n] - before[n] for n in IDLE_CALLS}
        assert during["claim"] == 0 and during["queue_state"] == 0, during
        assert sum(during.values()) <= 2 * during["next_work"], during

        job_id = Client(pool, now=clock).enqueue("idle-3", {}, run_at=clock() + dt.timedelta(seconds=30))
        looked = counts["next_work"]
        eventually(lambda: counts["next_work"] >= looked + 3, what="three looks")
        assert job_row(conn, job_id)["status"] == "pending", "not due yet"
        clock.advance(30)
        eventually(lambda: job_row(conn, job_id)["status"] == "completed", what="the job ran once due")


def test_an_idle_worker_runs_a_retry_once_its_backoff_ends(
    pool: ConnectionPool, clock: FakeClock, conn: psycopg.Connection[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/adr/0083: no statement announces a retry whose backoff ends;
    the parked queue's look finds it once the clock reaches it, not
    before."""
    attempts: list[dt.datetime] = []

    def handle(job: Job, ctx: Context) -> None:
        attempts.append(clock())
        if len(attempts) == 1:
            raise pgbackoff.RetryAfter("downstream 503", 10)

    worker = Worker(pool, [Queue("idle-retry", handle, concurrency=1)], poll_interval=0.05, now=clock)
    counts = idle_calls(monkeypatch, worker.client)
    with running(worker):
        eventually(lambda: worker.listening and all(p.parked for p in worker.producers), what="the producer parked")
        job_id = Client(pool, now=clock).enqueue("idle-retry", {})
        eventually(lambda: job_row(conn, job_id)["status"] == "retrying", what="the first attempt failed")
        looked = counts["next_work"]
        eventually(lambda: counts["next_work"] >= looked + 3, what="three looks")
        assert len(attempts) == 1, "the retry is not due yet"
        clock.advance(10)
        eventually(lambda: job_row(conn, job_id)["status"] == "completed", what="the retry ran once due")
    assert len(attempts) == 2
