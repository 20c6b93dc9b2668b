"""The Client's calls against a real PostgreSQL: what each one asks the
database, and the SQLSTATEs of its refusals as exceptions."""

from __future__ import annotations

import datetime as dt
from typing import Any

import psycopg
import pytest
from conftest import FakeClock, job_row
from psycopg_pool import ConnectionPool

import pgbackoff
from pgbackoff import Client, Graph, NewJob

UNICODE = {"to": "zoë@例え.jp", "subject": "Grüße ✓ 🎉", "lines": ["ä", "\u00e9", "\u2603"], "n": 1}


def test_enqueue_one(client: Client, conn: psycopg.Connection[Any], clock: FakeClock) -> None:
    job_id = client.enqueue("emails", UNICODE, priority=5, max_attempts=3)
    row = job_row(conn, job_id)
    assert row["status"] == "pending"
    assert row["payload"] == UNICODE
    assert row["run_at"] == clock()

    later = client.enqueue("emails", {"n": 2}, run_at=clock() + dt.timedelta(minutes=5))
    low = client.enqueue("emails", {"n": 3})
    # Higher priority first; a job whose run_at is ahead is not due.
    jobs = client.claim("emails") + client.claim("emails", 10)
    assert [j.id for j in jobs] == [job_id, low]
    assert jobs[0].payload == UNICODE
    assert jobs[0].priority == 5 and jobs[0].max_attempts == 3
    assert jobs[0].attempt == 1 and jobs[0].counted_attempt == 1
    assert jobs[0].locked_by == "test-worker"

    clock.advance(301)
    assert [j.id for j in client.claim("emails", 10)] == [later]


def test_enqueue_dedupe_key(client: Client) -> None:
    first = client.enqueue("emails", {"n": 1}, dedupe_key="order-7")
    assert client.enqueue("emails", {"n": 2}, dedupe_key="order-7") == first
    assert client.enqueue("sms", {"n": 2}, dedupe_key="order-7") != first


def test_enqueue_many(client: Client, conn: psycopg.Connection[Any], clock: FakeClock) -> None:
    ids = client.enqueue_many(
        [
            NewJob("emails", UNICODE),
            NewJob("emails", None, priority=9, dedupe_key="k"),
            NewJob("sms", [1, 2, 3], run_at=clock() + dt.timedelta(hours=1), max_attempts=2, policy="default"),
            NewJob("emails", {"dup": True}, dedupe_key="k"),
        ]
    )
    assert len(ids) == 4 and ids[1] == ids[3], "a dedupe key within the batch gives the same id"
    assert job_row(conn, ids[0])["payload"] == UNICODE
    assert job_row(conn, ids[1])["payload"] == {}
    assert job_row(conn, ids[2])["run_at"] == clock() + dt.timedelta(hours=1)
    assert [j.id for j in client.claim("emails")] == [ids[1]], "priority 9 first"
    assert client.enqueue_many([]) == []


def test_enqueue_many_is_atomic(client: Client, conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(pgbackoff.InvalidArgument) as err:
        client.enqueue_many([NewJob("emails", {"n": 1}), NewJob("", {"n": 2})])
    assert err.value.pgerror is not None and err.value.pgerror.sqlstate == "22023"
    assert conn.execute("SELECT count(*) FROM backoff.jobs").fetchone() == (0,)


def test_enqueue_in_the_callers_transaction(client: Client, db_url: str) -> None:
    with psycopg.connect(db_url) as tx:  # not autocommit: the calls join its transaction
        client.using(tx).enqueue("emails", {"n": 1})
        tx.rollback()
        client.using(tx).enqueue("emails", {"n": 2})
        assert client.claim("emails", 10) == [], "uncommitted: not visible to a worker"
        tx.commit()
    assert [j.payload for j in client.claim("emails", 10)] == [{"n": 2}]


def test_claim_complete_and_fencing(client: Client) -> None:
    job_id = client.enqueue("emails")
    (job,) = client.claim("emails", lease=60)
    assert job.status == "running" and job.lease_until is not None
    done = client.complete(job.id, job.attempt)
    assert done.status == "completed" and done.completed_at is not None

    with pytest.raises(pgbackoff.InvalidTransition):
        client.complete(job_id, job.attempt)
    with pytest.raises(pgbackoff.JobNotFound) as nf:
        client.complete(job_id + 1000, 1)
    assert "complete job" in str(nf.value)

    other = client.enqueue("emails")
    client.claim("emails")
    with pytest.raises(pgbackoff.StaleAttempt):
        client.complete(other, 2)
    with pytest.raises(pgbackoff.InvalidArgument, match="limit"):
        client.claim("emails", 0)


def test_a_claimed_job_reads_as_every_other_call_reads_it(client: Client, clock: FakeClock, db_url: str) -> None:
    """A claim's rows travel as one JSON value each (docs/adr/0067): every
    field, the timestamps, the history and the payload, equals the same job
    read through psycopg's loaders, in a session whose time zone is not
    UTC."""
    job_id = client.enqueue("emails", UNICODE, max_attempts=5, dedupe_key="order-7", priority=3, policy="default")
    (first,) = client.claim("emails", lease=60)
    client.fail(first.id, first.attempt, "smtp: 451 try later", retry_in=0)
    with psycopg.connect(db_url, autocommit=True, options="-c TimeZone=Asia/Kolkata") as conn:
        (claimed,) = client.using(conn).claim("emails", lease=60)
        (read,) = client.using(conn).list_jobs("emails")
    assert claimed.id == job_id
    assert claimed == read
    assert claimed.lease_until is not None and claimed.lease_until.utcoffset() == dt.timedelta(hours=5, minutes=30)
    assert [e.error for e in claimed.errors] == ["smtp: 451 try later"]
    assert claimed.last_failed_at is not None and claimed.created_at <= claimed.last_attempted_at  # type: ignore[operator]


def test_complete_many_skips_stale_entries(client: Client) -> None:
    client.enqueue_many([NewJob("emails") for _ in range(3)])
    jobs = client.claim("emails", 3)
    ids = [j.id for j in jobs]
    assert client.complete_many(ids, [1, 1, 2]) == ids[:2]


def test_fail_retryable_and_permanent(client: Client, clock: FakeClock) -> None:
    a, b = client.enqueue("emails"), client.enqueue("emails")
    (ja, jb) = client.claim("emails", 2)
    retried = client.fail(ja.id, ja.attempt, "smtp timeout")
    assert retried.status == "retrying" and retried.run_at > clock()
    assert retried.last_error == "smtp timeout"
    assert retried.errors[-1].attempt == 1 and retried.errors[-1].counted == 1
    dead = client.fail(jb.id, jb.attempt, "bad address", retryable=False)
    assert dead.status == "dead_lettered" and dead.dead_letter_reason == "non_retryable"
    assert {a, b} == {ja.id, jb.id}


def test_fail_cleans_the_error_text(client: Client) -> None:
    client.enqueue("emails")
    (job,) = client.claim("emails")
    failed = client.fail(job.id, job.attempt, "nul \x00 and a lone \udc80 surrogate " + "x" * 20000)
    assert failed.last_error is not None
    assert "\ufffd" in failed.last_error and "\x00" not in failed.last_error
    assert failed.last_error.endswith("bytes]")


def test_retry_after_and_snooze(client: Client, clock: FakeClock) -> None:
    client.enqueue("emails")
    (job,) = client.claim("emails")
    retried = client.fail(job.id, job.attempt, "429", retry_in=dt.timedelta(seconds=7))
    assert retried.run_at == clock() + dt.timedelta(seconds=7)

    clock.advance(7)
    (again,) = client.claim("emails")
    assert again.attempt == 2 and again.counted_attempt == 2
    snoozed = client.snooze(again.id, again.attempt, 90)
    assert snoozed.status == "pending" and snoozed.run_at == clock() + dt.timedelta(seconds=90)
    # The token stays; the budget is given back.
    assert snoozed.attempt == 2 and snoozed.counted_attempt == 1
    with pytest.raises(pgbackoff.StaleAttempt):
        client.snooze(again.id, again.attempt, 90)


def test_heartbeat_extends_the_lease_past_its_end(client: Client, clock: FakeClock) -> None:
    client.enqueue("reports")
    (job,) = client.claim("reports", lease=30)
    assert job.lease_until == clock() + dt.timedelta(seconds=30)
    clock.advance(25)
    until = client.heartbeat(job.id, job.attempt, extend=30)
    assert until == clock() + dt.timedelta(seconds=30)
    clock.advance(20)  # 45 s after the claim: past the first lease's end
    assert client.reap() == 0
    clock.advance(11)
    assert client.reap() == 1
    with pytest.raises(pgbackoff.StaleAttempt):
        client.heartbeat(job.id, job.attempt)


def test_acquire_not_ready(client: Client, clock: FakeClock) -> None:
    job_id = client.enqueue("steps", run_at=clock() + dt.timedelta(minutes=1))
    with pytest.raises(pgbackoff.NotReady) as err:
        client.acquire(job_id)
    assert err.value.retry_at == clock() + dt.timedelta(minutes=1)
    assert err.value.attempts == 0
    clock.advance(60)
    assert client.acquire(job_id).attempt == 1


def test_cancel_and_replay(client: Client) -> None:
    job_id = client.enqueue("emails")
    (job,) = client.claim("emails")
    assert client.cancel(job_id, "customer left").status == "cancelled"
    with pytest.raises(pgbackoff.InvalidTransition):
        client.complete(job_id, job.attempt)
    replayed = client.replay(job_id)
    assert replayed.status == "pending" and replayed.counted_attempt == 0
    (again,) = client.claim("emails")
    assert again.attempt == 2 and again.counted_attempt == 1
    with pytest.raises(pgbackoff.InvalidTransition):
        client.replay(job_id)


def test_stats_and_replay_dead_letters(client: Client) -> None:
    ids = client.enqueue_many([NewJob("emails") for _ in range(3)])
    jobs = client.claim("emails", 2)
    for j in jobs:
        client.fail(j.id, j.attempt, "poison", retryable=False)
    (stats,) = client.stats(window=dt.timedelta(minutes=15))
    assert stats.queue == "emails"
    assert (stats.pending, stats.running, stats.dead_lettered, stats.due, stats.dead_letters) == (1, 0, 2, 1, 2)
    assert (stats.expired, stats.paused, stats.blocked) == (0, False, 0)

    outcomes = client.replay_dead_letters("emails")
    assert [(o.job_id, o.replayed) for o in outcomes] == [(jobs[0].id, True), (jobs[1].id, True)]
    (stats,) = client.stats()
    assert stats.pending == 3 and stats.dead_lettered == 0
    assert sorted(ids) == sorted([j.id for j in client.claim("emails", 3)])

    # A job that waits for another is blocked.
    client.enqueue_graph(Graph().add("parent", "emails").add("child", "emails", depends_on=["parent"]))
    client.pause_queue("emails")
    (stats,) = client.stats()
    assert (stats.blocked, stats.expired, stats.paused) == (1, 0, True)


def test_operator_reads(client: Client) -> None:
    ids = client.enqueue_many([NewJob("emails", {"n": i}) for i in range(5)] + [NewJob("sms")])
    (job,) = client.claim("emails")
    client.fail(job.id, job.attempt, "order 42 refused", retryable=False)
    # Keyset pages of two, to the end.
    seen: list[int] = []
    after = None
    while True:
        page = client.list_jobs("emails", after_id=after, limit=2, payloads=False)
        seen += [j.id for j in page]
        if len(page) < 2:
            break
        after = page[-1].id
    assert seen == sorted(ids[:5]) and all(j.payload is None for j in page)
    newest = client.list_jobs(order="newest", statuses=["pending"], limit=10)
    assert [j.id for j in newest] == sorted(set(ids) - {job.id}, reverse=True)
    (dead,) = client.list_jobs(dead_letter_reason="non_retryable")
    assert dead.id == job.id and dead.status == "dead_lettered"

    detail = client.job_detail(job.id)
    assert detail is not None and detail.job.id == job.id and detail.effective_policy == "default"
    assert detail.effective_max_attempts > 0 and detail.job.last_error == "order 42 refused"
    assert client.job_detail(max(ids) + 1) is None

    (group,) = client.dead_letter_groups("emails")
    assert (group.queue, group.reason, group.signature, group.count) == ("emails", "non_retryable", "order N refused", 1)
    assert group.example == "order 42 refused"
    with pytest.raises(pgbackoff.InvalidArgument):
        client.list_jobs(order="sideways")


def test_queue_state_and_pause(client: Client) -> None:
    st = client.queue_state("emails")
    assert st.state == "closed" and st.next_claim_at is None and st.rate is None
    client.enqueue("emails")
    assert client.pause_queue("emails") is True
    assert client.claim("emails") == []
    assert client.resume_queue("emails") is True
    assert len(client.claim("emails")) == 1


def test_wait_for_jobs_and_stop_waiting(client: Client, conn: psycopg.Connection[Any]) -> None:
    client.wait_for_jobs("emails", ttl=30)
    assert conn.execute("SELECT worker FROM backoff.waiting_workers").fetchall() == [("test-worker",)]
    assert client.stop_waiting("emails") is True
    assert client.stop_waiting("emails") is False
    with pytest.raises(pgbackoff.InvalidArgument):
        client.wait_for_jobs("emails", ttl=dt.timedelta(days=2))


def test_time_is_not_a_privilege_without_time_injection(
    client: Client, conn: psycopg.Connection[Any], clock: FakeClock, db_url: str
) -> None:
    conn.execute("UPDATE backoff.settings SET time_injection = false")
    conn.execute("CREATE ROLE py_worker_role NOLOGIN IN ROLE backoff_worker, backoff_producer")
    try:
        with psycopg.connect(db_url, autocommit=True) as own:  # conn.info.dsn hides the password
            own.execute("SET ROLE py_worker_role")
            c = Client(own, now=lambda: clock() + dt.timedelta(hours=1))
            with pytest.raises(pgbackoff.InvalidArgument, match="max_clock_skew"):
                c.claim("emails")
    finally:
        conn.execute("DROP ROLE py_worker_role")


def test_permission_denied(client: Client, conn: psycopg.Connection[Any], db_url: str) -> None:
    conn.execute("CREATE ROLE py_outsider NOLOGIN")
    try:
        with psycopg.connect(db_url, autocommit=True) as own:  # conn.info.dsn hides the password
            own.execute("SET ROLE py_outsider")
            with pytest.raises(pgbackoff.PermissionDenied):
                Client(own).enqueue("emails")
    finally:
        conn.execute("DROP ROLE py_outsider")


def test_schema_check(pool: ConnectionPool, server: Any) -> None:
    Client(pool).check_schema()
    admin, url, _ = server
    from psycopg import sql
    from psycopg.conninfo import make_conninfo

    admin.execute(sql.SQL("CREATE DATABASE pgbackoff_py_empty"))
    try:
        with psycopg.connect(make_conninfo(url, dbname="pgbackoff_py_empty"), autocommit=True) as empty:
            with pytest.raises(pgbackoff.SchemaTooOld, match="migrate up"):
                Client(empty).check_schema()
    finally:
        admin.execute("DROP DATABASE pgbackoff_py_empty WITH (FORCE)")
