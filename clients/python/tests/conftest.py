"""Fixtures: a fresh database with the pgbackoff schema for every test.

TEST_DATABASE_URL names a database on a PostgreSQL server where its role
may create databases. If that database has the schema (the Go test hands
one over, migrated), every test gets a copy of it (CREATE DATABASE ...
TEMPLATE, milliseconds); else a template is made once from
dist/backoff.sql. Without TEST_DATABASE_URL the tests fail: a missing
server must never pass as green. Every copy starts its transactions at
the level TEST_DATABASE_URL's sessions do (default_transaction_isolation,
which a copy does not inherit), so that the whole suite runs at a
database's default of serializable when given one.
"""

from __future__ import annotations

import datetime as dt
import os
import pathlib
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg_pool import ConnectionPool

import pgbackoff

DIST = pathlib.Path(__file__).resolve().parents[3] / "dist" / "backoff.sql"


@pytest.fixture(scope="session")
def server() -> Iterator[tuple[psycopg.Connection[Any], str, str]]:
    """(an autocommit connection to TEST_DATABASE_URL, its URL, the
    template database's name)."""
    url = os.environ.get("TEST_DATABASE_URL")
    if not url:
        pytest.fail(
            "TEST_DATABASE_URL is not set: give a database on a server where this role may create databases "
            "(e.g. postgres://postgres@localhost/postgres); see clients/python/README.md"
        )
    admin = psycopg.connect(url, autocommit=True)
    has_schema = admin.execute("SELECT to_regnamespace('backoff') IS NOT NULL").fetchone()
    own_template = None
    if has_schema and has_schema[0]:
        template = admin.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
    else:
        own_template = template = "pgbackoff_py_tmpl_" + secrets.token_hex(4)
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(template)))
        with psycopg.connect(make_conninfo(url, dbname=template), autocommit=True) as conn:
            conn.execute(DIST.read_text())  # type: ignore[call-overload]
    try:
        yield admin, url, template
    finally:
        if own_template:
            admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(own_template)))
        admin.close()


@pytest.fixture
def db_url(server: tuple[psycopg.Connection[Any], str, str]) -> Iterator[str]:
    """A fresh database with the schema, time injection on (tests pass
    their own p_now), dropped after the test."""
    admin, url, template = server
    level = admin.execute("SHOW default_transaction_isolation").fetchone()
    name = "pgbackoff_py_" + secrets.token_hex(6)
    for _ in range(50):
        try:
            admin.execute(sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(sql.Identifier(name), sql.Identifier(template)))
            break
        except psycopg.errors.ObjectInUse:  # the template is briefly in use by another copy
            time.sleep(0.02)
    if level is not None and level[0] != "read committed":
        admin.execute(
            sql.SQL("ALTER DATABASE {} SET default_transaction_isolation = {}").format(sql.Identifier(name), sql.Literal(level[0]))
        )
    test_url = make_conninfo(url, dbname=name)
    with psycopg.connect(test_url, autocommit=True) as conn:
        conn.execute("UPDATE backoff.settings SET time_injection = true")
    try:
        yield test_url
    finally:
        admin.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture
def pool(db_url: str) -> Iterator[ConnectionPool]:
    p = ConnectionPool(db_url, min_size=1, max_size=10, kwargs={"autocommit": True}, open=True)
    try:
        yield p
    finally:
        p.close()


@pytest.fixture
def conn(db_url: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection of the test's own, to look at what the calls did."""
    with psycopg.connect(db_url, autocommit=True) as c:
        yield c


class FakeClock:
    """A clock tests move by hand: passed as p_now, it drives leases,
    backoffs and reaps without sleeping."""

    def __init__(self) -> None:
        self._now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        self._lock = threading.Lock()

    def __call__(self) -> dt.datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> dt.datetime:
        with self._lock:
            self._now += dt.timedelta(seconds=seconds)
            return self._now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def client(pool: ConnectionPool, clock: FakeClock) -> pgbackoff.Client:
    return pgbackoff.Client(pool, worker_id="test-worker", now=clock)


def job_row(conn: psycopg.Connection[Any], job_id: int) -> dict[str, Any]:
    """The job's row, read by the test (the package itself never reads the
    table)."""
    cur = conn.execute(
        "SELECT status, attempts, uncounted_attempts, run_at, lease_until, last_error, dead_letter_reason, payload "
        "FROM backoff.jobs WHERE id = %s",
        (job_id,),
    )
    row = cur.fetchone()
    assert row is not None, f"job {job_id} not found"
    assert cur.description is not None
    return {d.name: v for d, v in zip(cur.description, row)}


def eventually(check: Callable[[], bool], timeout: float = 10.0, what: str = "condition") -> None:
    """Wait for something a worker thread does (not for a backoff: time is
    a parameter), failing after timeout."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)
