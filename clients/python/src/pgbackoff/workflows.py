"""Workflows (docs/workflows.md): a graph of jobs enqueued in one call, the
output a completed job leaves its dependents, and the progress a running
one reports with its heartbeat.

A graph is a :class:`Graph` built job by job, or plain data: a list of the
documents ``backoff.enqueue_graph`` takes (``ref``, ``queue``, ``payload``,
``depends_on``...). Either goes to :meth:`pgbackoff.Client.enqueue_graph`.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from .errors import InvalidArgument
from .types import Status

#: What a dependency does to its child when the parent ends without
#: completing (dead-lettered or cancelled): ``cancel`` the child (the
#: default), ``run`` it as if the parent had completed, or ``wait`` blocked
#: for an operator (backoff.unblock, or a replay of the parent).
OnFailure = Literal["cancel", "run", "wait"]

#: The largest progress document backoff.heartbeat takes, in bytes.
MAX_PROGRESS_BYTES = 8192


@dataclass(frozen=True)
class RawJSON:
    """A JSON text sent as it is, where an output or a progress is taken
    (as Go's json.RawMessage): not encoded again."""

    text: str


def encode_json(op: str, value: Any) -> str:
    """value as compact JSON text (a RawJSON as it is); a value json cannot
    encode is InvalidArgument naming op."""
    if isinstance(value, RawJSON):
        return value.text
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise InvalidArgument(op, f"encode as JSON: {e}") from e


@dataclass(frozen=True)
class Dependency:
    """One parent of a graph's job: the job of the same graph named ``ref``,
    or the existing job ``job``, with the policy for a parent that fails
    (None: the database's default, cancel)."""

    ref: str | None = None
    job: int | None = None
    on_failure: OnFailure | None = None

    def document(self) -> dict[str, Any]:
        d: dict[str, Any] = {"ref": self.ref} if self.ref is not None else {"job": self.job}
        if self.on_failure is not None:
            d["on_failure"] = self.on_failure
        return d


def after(ref: str, on_failure: OnFailure | None = None) -> Dependency:
    """A dependency on the job of the same graph named ref."""
    return Dependency(ref=ref, on_failure=on_failure)


def after_job(job_id: int, on_failure: OnFailure | None = None) -> Dependency:
    """A dependency on an existing job."""
    return Dependency(job=job_id, on_failure=on_failure)


#: A dependency as Graph.add takes it: a ref of the same graph, the id of
#: an existing job, or a Dependency with its policy.
DependsOn = str | int | Dependency


@dataclass(frozen=True)
class GraphJob:
    """One job of a Graph: what Client.enqueue takes, with a ref local to
    the graph and the jobs it depends on."""

    ref: str
    queue: str
    payload: Any = None
    depends_on: Sequence[DependsOn] = ()
    run_at: dt.datetime | None = None
    max_attempts: int | None = None
    priority: int = 0
    dedupe_key: str | None = None
    policy: str | None = None

    def document(self) -> dict[str, Any]:
        """The element of backoff.enqueue_graph's p_jobs for this job."""
        d: dict[str, Any] = {"ref": self.ref, "queue": self.queue, "payload": {} if self.payload is None else self.payload}
        if self.run_at is not None:
            d["run_at"] = self.run_at.isoformat()
        if self.max_attempts is not None:
            d["max_attempts"] = self.max_attempts
        if self.priority:
            d["priority"] = self.priority
        if self.dedupe_key is not None:
            d["dedupe_key"] = self.dedupe_key
        if self.policy is not None:
            d["policy"] = self.policy
        if self.depends_on:
            d["depends_on"] = [dep.document() if isinstance(dep, Dependency) else dep for dep in self.depends_on]
        return d


@dataclass
class Graph:
    """A workflow to enqueue in one call (Client.enqueue_graph): jobs
    across queues with dependencies among them and on existing jobs::

        graph = (
            Graph()
            .add("extract", "etl", {"table": "orders"})
            .add("load-eu", "etl", depends_on=["extract"])
            .add("load-us", "etl", depends_on=["extract"])
            .add("report", "reports", depends_on=["load-eu", after("load-us", on_failure="run")])
        )
        ids = client.enqueue_graph(graph)  # {"extract": 1, "load-eu": 2, ...}
    """

    jobs: list[GraphJob] = field(default_factory=list)

    def add(
        self,
        ref: str,
        queue: str,
        payload: Any = None,
        *,
        depends_on: Sequence[DependsOn] = (),
        run_at: dt.datetime | None = None,
        max_attempts: int | None = None,
        priority: int = 0,
        dedupe_key: str | None = None,
        policy: str | None = None,
    ) -> Graph:
        """Add a job named ref, in queue, that runs once every dependency
        has completed; the options are those of Client.enqueue."""
        self.jobs.append(
            GraphJob(
                ref=ref, queue=queue, payload=payload, depends_on=tuple(depends_on), run_at=run_at,
                max_attempts=max_attempts, priority=priority, dedupe_key=dedupe_key, policy=policy,
            )
        )  # fmt: skip
        return self

    def documents(self) -> list[dict[str, Any]]:
        return [j.document() for j in self.jobs]


#: What Client.enqueue_graph takes: a Graph, or the documents themselves.
GraphLike = Graph | Sequence[Mapping[str, Any]]


def graph_text(graph: GraphLike) -> tuple[int, str]:
    """How many jobs, and backoff.enqueue_graph's p_jobs as JSON text."""
    docs = graph.documents() if isinstance(graph, Graph) else [dict(j) for j in graph]
    return len(docs), encode_json(f"enqueue a graph of {len(docs)} jobs", docs)


#: The statuses of a job that has finished.
FINISHED = ("completed", "dead_lettered", "cancelled")


@dataclass(frozen=True)
class FinishedJob:
    """How a job ended, as wait_for_output returns it."""

    id: int
    #: completed, dead_lettered or cancelled.
    status: Status
    #: The output it recorded (any JSON value); None when it recorded none.
    output: Any


@dataclass(frozen=True)
class ParentOutput:
    """One job a job depends on, as the child sees it
    (backoff.parent_outputs)."""

    parent_id: int
    #: None when the parent was pruned.
    queue: str | None
    #: None when the parent was pruned.
    status: Status | None
    on_failure: OnFailure
    #: The output it recorded (any JSON value); None when it recorded none.
    output: Any
