"""When a producer claims: the decisions of one queue's claim loop, without
I/O, shared by the threaded and the asyncio worker.

A producer claims whenever a handler slot is free and the queue was not
found empty: a finished handler frees a slot and triggers the next claim,
and a short claim is no reason to wait. Only a claim that returns nothing
backs off, and then the queue is asked why (``backoff.queue_state``,
docs/adr/0047):

- ``next_claim_at`` ahead (an open breaker, a rate limit out of tokens):
  hold the queue until then; wake-ups and freed slots are ignored, and the
  idle registration is dropped (enqueuers need not wake a held queue);
- a half-open breaker with every probe out: wait for a probe's result (a
  freed slot, a completion of the queue, the poll), not for wake-ups;
- a rate-limited queue with a whole token: claim once more (the token may
  have come just after the claim);
- else the queue is idle: register as waiting (``backoff.wait_for_jobs``,
  docs/adr/0027), look once more, then wait for a notification, a reaped
  lease or the poll. Two claims in a row that find jobs end the
  registration (``backoff.stop_waiting``): a busy queue needs no wake-ups.

A queue found drained (idle, nothing holding it) parks when the worker's
look runs (docs/adr/0083): it leaves its poll to the maintenance loop,
which asks ``backoff.next_work`` about every parked queue at once each
poll interval and wakes those with a job due; the look also says when
fire_schedules, reap and rotate have work. While jobs flow, reap and
rotate keep their reap_interval; idle, they and fire_schedules run once
every IDLE_MAINTENANCE seconds, which keeps backoff.liveness seeing the
worker. So an idle worker sends about one statement a second whatever the
number of its queues.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass

from .types import QueueState

#: Signals a producer waits for.
WAKE = "wake"  # a notification of its queue, or reaped leases
FREED = "freed"  # a handler slot became free
SETTLED = "settled"  # the completer committed completions of its queue
POLL = "poll"  # the poll interval passed

#: How often an idle worker reaps, rotates and fires schedules when no look
#: asked for it: under backoff.liveness's minute for the workers it sees.
IDLE_MAINTENANCE = 30.0


@dataclass(frozen=True)
class Step:
    #: Claim again at once (after the registration change below).
    again: bool
    #: Register as waiting (backoff.wait_for_jobs) before claiming again.
    register: bool = False
    #: End the registration (backoff.stop_waiting).
    unregister: bool = False


class Pacer:
    def __init__(self, batch_size: int) -> None:
        self.batch_size = batch_size
        self.idle = False  # registered as waiting
        self.streak = 0  # claims in a row that found jobs
        self.empty = False  # nothing was due at the last look
        self.hold_until: float | None = None  # time.monotonic() when the hold ends
        self.hold_until_clock: dt.datetime | None = None  # the same on an injected clock
        self.half_open = False
        self.await_probe = False
        self.uncontrolled = False  # the last state read showed no controls
        self.looked_again = False
        self.drained = False  # the last claim found the queue drained

    def want(self, free: int, clock: dt.datetime | None) -> int:
        """How many jobs to claim now (0: wait)."""
        if self.hold_until is not None:
            ended = time.monotonic() >= self.hold_until or (
                clock is not None and self.hold_until_clock is not None and clock >= self.hold_until_clock
            )
            if not ended:
                return 0
            # The end of a hold means "claim", whatever else happened.
            self.release()
            self.empty = False
        if self.await_probe or self.empty or free <= 0:
            return 0
        return min(free, self.batch_size)

    def release(self) -> None:
        self.hold_until = None
        self.hold_until_clock = None

    def found(self, n: int, want: int, woken: bool) -> Step:
        """After a claim that returned n > 0 jobs of want; woken: a wake-up
        came meanwhile (jobs enqueued: claim them now)."""
        self.streak += 1
        self.looked_again = False
        self.drained = False
        unregister = self.idle and self.streak >= 2
        if unregister:
            self.idle = False
        if n < want and self.idle and self.uncontrolled and not woken:
            # A trickle: the claim took everything due and every job
            # enqueued since will notify; a claim now would find nothing.
            self.streak = 0
            self.empty = True
            self.drained = True
            return Step(again=False, unregister=unregister)
        return Step(again=True, unregister=unregister)

    def found_none(
        self,
        st: QueueState | None,
        listening: bool,
        read_mono: float,
        read_clock: dt.datetime | None,
    ) -> Step:
        """After a claim that returned nothing and the state read that
        followed it (None: the read failed; the queue is treated as idle).
        read_mono and read_clock are the times taken before the read: a
        hold counts from them, not from after the read."""
        self.streak = 0
        self.uncontrolled = False
        self.drained = False
        if st is not None:
            self.half_open = st.state == "half_open"
            self.uncontrolled = st.state == "closed" and st.rate is None
            wait = 0.0
            if st.next_claim_at is not None:
                wait = max(0.0, (st.next_claim_at - st.read_at).total_seconds())
            if self.half_open and st.probes_left == 0 and wait <= 0:
                self.await_probe = True
                return self._hold()
            if wait > 0:
                self.hold_until = read_mono + wait
                self.hold_until_clock = read_clock + dt.timedelta(seconds=wait) if read_clock else None
                return self._hold()
            if st.rate is not None and (st.tokens or 0) >= 1 and not self.looked_again:
                self.looked_again = True
                return Step(again=True)
        if not self.idle and listening:
            # Register, then look once more: a job enqueued before the
            # registration was visible did not notify.
            self.idle = True
            return Step(again=True, register=True)
        self.empty = True
        self.drained = True
        return Step(again=False)

    def _hold(self) -> Step:
        self.empty = True
        unregister, self.idle = self.idle, False
        return Step(again=False, unregister=unregister)

    def failed(self) -> None:
        """A claim failed: wait for the poll before trying again."""
        self.empty = True
        self.drained = False

    def parked(self, look_on: bool) -> bool:
        """Whether the producer leaves its poll to the worker's look: the
        queue was found drained and nothing since woke it."""
        return look_on and self.empty and self.drained and self.hold_until is None and not self.await_probe

    def timeout(self, until_poll: float) -> float:
        """How long to wait for a signal."""
        t = until_poll
        if self.hold_until is not None:
            t = min(t, self.hold_until - time.monotonic())
        return max(0.0, t)

    def signalled(self, signals: set[str]) -> None:
        if WAKE in signals:
            self.empty = False
        if POLL in signals:
            self.empty = False
            self.await_probe = False
        if FREED in signals and self.half_open:
            self.empty = False
            self.await_probe = False
        if SETTLED in signals and self.await_probe:
            self.empty = False
            self.await_probe = False


class Poll:
    """A producer's poll: every interval it looks whatever the signals."""

    def __init__(self, every: float) -> None:
        self.every = every
        self.next = time.monotonic() + every

    def until(self) -> float:
        """Seconds to the next poll (negative: overdue)."""
        return self.next - time.monotonic()

    def tick(self, signals: set[str]) -> bool:
        """Add POLL to signals when the interval has passed; whether it had."""
        if time.monotonic() < self.next:
            return False
        signals.add(POLL)
        self.next = time.monotonic() + self.every
        return True


class Maintenance:
    """When the maintenance loop calls: reap and rotate every reap_every,
    fire due schedules every fire_every, the first time at start (what
    came due while no worker ran fires now), and the idle queues' look
    every look_every (None: no look); times are monotonic seconds. With the
    look on, fire_schedules is left to it, reap and rotate run at reap_every
    only while jobs flow, and all three once every IDLE_MAINTENANCE. A
    call that overruns its interval moves the next one to its end: no
    burst of calls to catch up."""

    def __init__(self, reap_every: float | None, fire_every: float | None, now: float, look_every: float | None = None) -> None:
        self.reap_every = reap_every or None
        self.fire_every = fire_every
        self.next_reap = now + self.reap_every if self.reap_every else None
        self.next_fire = now if fire_every is not None else None
        self.fire_at_start = fire_every is not None
        self.look_every = look_every
        self.next_look = now + look_every if look_every else None
        self.last_full = now
        #: The look answered last time (False: it failed, and the loop does
        #: what it would have decided at the intervals of old).
        self.look_ok = True

    @property
    def look_on(self) -> bool:
        return self.next_look is not None

    def look_off(self) -> None:
        """The schema has no backoff.next_work: the intervals of old."""
        self.next_look = None

    def due(self) -> float:
        """When the next call is due."""
        return min(t for t in (self.next_reap, self.next_fire, self.next_look) if t is not None)

    def look_due(self, now: float) -> bool:
        return self.next_look is not None and now >= self.next_look

    def looked(self, now: float) -> None:
        if self.next_look is not None and self.look_every is not None:
            self.next_look = max(self.next_look + self.look_every, now)

    def full_due(self, now: float) -> bool:
        """Reap, rotate and fire now although no look asked for them."""
        return self.look_on and now - self.last_full >= IDLE_MAINTENANCE

    def fire_due(self, now: float) -> bool:
        """fire_schedules at its own interval: at start, and when no look
        covers the schedules."""
        if self.next_fire is None or now < self.next_fire:
            return False
        if self.fire_at_start or not self.look_on or not self.look_ok:
            return True
        self.fired(now)  # the look covers the schedules
        return False

    def reap_due(self, now: float, busy: bool = True) -> bool:
        """reap and rotate at their interval: while jobs flow, or when no
        look covers them."""
        if self.next_reap is None or now < self.next_reap:
            return False
        if busy or not self.look_on or not self.look_ok:
            return True
        self.reaped(now)  # idle: the look and IDLE_MAINTENANCE cover it
        return False

    def fired(self, now: float) -> None:
        self.fire_at_start = False
        if self.next_fire is not None and self.fire_every is not None:
            self.next_fire = max(self.next_fire + self.fire_every, now)

    def reaped(self, now: float) -> None:
        if self.next_reap is not None and self.reap_every is not None:
            self.next_reap = max(self.next_reap + self.reap_every, now)

    def full(self, now: float) -> None:
        self.last_full = now


@dataclass
class Found:
    """What one look found due."""

    queues: list[str]
    fire: bool = False
    reap: bool = False
    rotate: bool = False

    @staticmethod
    def of(rows: list[tuple[str, str, bool]]) -> Found:
        f = Found(queues=[])
        for kind, queue, due in rows:
            if not due:
                continue
            if kind == "queue":
                f.queues.append(queue)
            elif kind == "schedules":
                f.fire = True
            elif kind == "reap":
                f.reap = True
            elif kind == "rotate":
                f.rotate = True
        return f
