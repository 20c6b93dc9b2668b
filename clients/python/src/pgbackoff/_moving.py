"""Enqueues of a queue that is moving to another shard, tried again on a
pool (docs/sharding.md, "Moving a queue that has jobs")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .errors import QueueMoving

T = TypeVar("T")

# A move refuses enqueues of the queue on its old shard (QueueMoving,
# SQLSTATE 55006) from its mark until the router's placement flips, a few
# statements later (longer while the old shard still has transactions open
# from before the mark, which the mover waits for; docs/adr/0092). A client
# on a pool runs each call in a transaction of its own, so it enqueues
# again: through the router the next try goes to the queue's new shard
# once the move has flipped. These bound how long it tries.

#: The longest an enqueue of a moving queue is tried again, in seconds.
QUEUE_MOVE_WAIT = 10.0
#: The first pause between two tries, in seconds; it doubles after each.
FIRST_PAUSE = 0.01
#: The longest pause between two tries, in seconds.
MAX_PAUSE = 0.25


def retry_while_moving(enqueue: Callable[[], T]) -> T:
    """enqueue(), again while it raises QueueMoving, with pauses from
    FIRST_PAUSE doubling up to MAX_PAUSE, for at most QUEUE_MOVE_WAIT; then
    the last QueueMoving is raised."""
    deadline = time.monotonic() + QUEUE_MOVE_WAIT
    pause = FIRST_PAUSE
    while True:
        try:
            return enqueue()
        except QueueMoving:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
        time.sleep(min(pause, left))
        pause = min(2 * pause, MAX_PAUSE)


async def retry_while_moving_async(enqueue: Callable[[], Awaitable[T]]) -> T:
    """retry_while_moving, awaited: cancelling the task ends the wait."""
    deadline = time.monotonic() + QUEUE_MOVE_WAIT
    pause = FIRST_PAUSE
    while True:
        try:
            return await enqueue()
        except QueueMoving:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
        await asyncio.sleep(min(pause, left))
        pause = min(2 * pause, MAX_PAUSE)
