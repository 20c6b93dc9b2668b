"""pgbackoff for Python: producers, workers and operators on psycopg 3.

Every decision (when a job runs again, whether it runs at all) is taken by
the ``backoff.*`` SQL functions in PostgreSQL; this package calls them, one
statement per method, turns their SQLSTATEs into exceptions, and runs the
worker loop: claims paced by the queue, heartbeats, batched completions,
LISTEN wake-ups and a graceful shutdown.
"""

from ._outcome import Context
from ._sql import FINISHED_CHANNEL, NOTIFY_CHANNEL, REQUIRED_SCHEMA
from .aio import AsyncClient, AsyncHandler, AsyncWorker
from .client import Client, Clock
from .errors import (
    Cancelled,
    InvalidArgument,
    InvalidTransition,
    JobNotFound,
    LeaseExpired,
    LeaseLost,
    NotReady,
    Permanent,
    PermissionDenied,
    PgBackoffError,
    QueueMoving,
    RetryAfter,
    NotARouter,
    SchemaTooOld,
    Snooze,
    StaleAttempt,
    WorkerShutdown,
)
from .types import AttemptError, DeadLetterGroup, Job, JobDetail, NewJob, QueueState, QueueStats, ReplayOutcome, ScheduleFire
from .worker import Handler, Queue, Worker
from .workflows import Dependency, FinishedJob, Graph, GraphJob, OnFailure, ParentOutput, RawJSON, after, after_job

__all__ = [
    "FINISHED_CHANNEL",
    "NOTIFY_CHANNEL",
    "REQUIRED_SCHEMA",
    "AsyncClient",
    "AsyncHandler",
    "AsyncWorker",
    "AttemptError",
    "Cancelled",
    "Client",
    "Clock",
    "Context",
    "DeadLetterGroup",
    "FinishedJob",
    "Dependency",
    "Graph",
    "GraphJob",
    "Handler",
    "InvalidArgument",
    "InvalidTransition",
    "Job",
    "JobDetail",
    "JobNotFound",
    "LeaseExpired",
    "LeaseLost",
    "NewJob",
    "NotReady",
    "OnFailure",
    "ParentOutput",
    "Permanent",
    "PermissionDenied",
    "PgBackoffError",
    "Queue",
    "QueueMoving",
    "RawJSON",
    "QueueState",
    "QueueStats",
    "ReplayOutcome",
    "RetryAfter",
    "ScheduleFire",
    "NotARouter",
    "SchemaTooOld",
    "Snooze",
    "StaleAttempt",
    "Worker",
    "WorkerShutdown",
    "after",
    "after_job",
]
