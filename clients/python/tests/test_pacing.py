"""The producer's pacing decisions (no I/O): what an empty claim and the
queue's state make a producer do next (docs/adr/0047)."""

from __future__ import annotations

import datetime as dt
import time

from pgbackoff._pacing import FREED, IDLE_MAINTENANCE, POLL, SETTLED, WAKE, Maintenance, Pacer
from pgbackoff.types import QueueState

T0 = dt.datetime(2030, 1, 1, tzinfo=dt.timezone.utc)


def state(**kw: object) -> QueueState:
    base: dict[str, object] = dict(
        queue="q", state="closed", opened_at=None, failures=0, probes_left=None, rate=None, burst=None,
        tokens=None, next_claim_at=None, read_at=T0,
    )  # fmt: skip
    base.update(kw)
    return QueueState(**base)  # type: ignore[arg-type]


def test_an_idle_queue_registers_then_waits_for_a_wake_up() -> None:
    p = Pacer(batch_size=5)
    assert p.want(10, None) == 5
    step = p.found_none(state(), listening=True, read_mono=time.monotonic(), read_clock=None)
    assert step.again and step.register, "register, then look once more"
    step = p.found_none(state(), listening=True, read_mono=time.monotonic(), read_clock=None)
    assert not step.again and not step.register
    assert p.want(10, None) == 0
    p.signalled({WAKE})
    assert p.want(10, None) == 5
    # Two claims in a row that find jobs: a backlog, the registration ends.
    assert not p.found(5, 5, woken=False).unregister
    assert p.found(5, 5, woken=False).unregister


def test_a_held_queue_waits_for_next_claim_at_whatever_wakes_it() -> None:
    p = Pacer(batch_size=1)
    step = p.found_none(
        state(state="open", next_claim_at=T0 + dt.timedelta(seconds=60)),
        listening=True, read_mono=time.monotonic(), read_clock=T0,
    )  # fmt: skip
    assert not step.again
    p.signalled({WAKE, FREED, SETTLED})
    assert p.want(1, T0 + dt.timedelta(seconds=59)) == 0, "held: wake-ups are ignored"
    assert 59 < p.timeout(3600) <= 60
    assert p.want(1, T0 + dt.timedelta(seconds=60)) == 1, "the injected clock reached next_claim_at"


def test_a_half_open_breaker_waits_for_its_probe() -> None:
    p = Pacer(batch_size=1)
    p.found_none(state(state="half_open", probes_left=0), listening=True, read_mono=time.monotonic(), read_clock=None)
    p.signalled({WAKE})
    assert p.want(1, None) == 0, "a notification is not the probe's result"
    p.signalled({SETTLED})
    assert p.want(1, None) == 1


def test_a_rate_limited_queue_with_a_token_is_claimed_once_more() -> None:
    p = Pacer(batch_size=1)
    st = state(rate=10.0, burst=1, tokens=1.0)
    assert p.found_none(st, listening=False, read_mono=time.monotonic(), read_clock=None).again
    assert not p.found_none(st, listening=False, read_mono=time.monotonic(), read_clock=None).again
    p.signalled({POLL})
    assert p.want(1, None) == 1


def test_maintenance_fires_at_start_and_reaps_every_interval() -> None:
    m = Maintenance(5.0, 1.0, 100.0)
    assert m.due() == 100.0
    assert m.fire_due(100.0) and not m.reap_due(100.0)
    m.fired(100.2)
    assert m.due() == 101.0
    assert m.reap_due(105.0)
    # A reap that overran its interval: the next one counts from its end.
    m.reaped(112.0)
    assert m.next_reap == 112.0
    # Without schedules only the reap is due; with neither interval nothing.
    only_reap = Maintenance(5.0, None, 0.0)
    assert only_reap.due() == 5.0 and not only_reap.fire_due(100.0)
    assert not Maintenance(0.0, None, 0.0).reap_due(100.0)


def test_a_drained_queue_parks_only_while_the_look_runs() -> None:
    """docs/adr/0083: a claim that found nothing, registered and without
    controls, parks the producer; a wake-up, a hold or a failed claim does
    not leave it parked."""
    p = Pacer(batch_size=1)
    st = state()
    assert p.found_none(st, listening=True, read_mono=time.monotonic(), read_clock=None).register
    assert not p.found_none(st, listening=True, read_mono=time.monotonic(), read_clock=None).again
    assert p.parked(True) and not p.parked(False)
    p.signalled({WAKE})
    assert not p.parked(True) and p.want(1, None) == 1
    p.failed()
    assert not p.parked(True), "a failed claim polls"
    held = Pacer(batch_size=1)
    held.found_none(state(rate=1.0, burst=1, tokens=0.0, next_claim_at=T0 + dt.timedelta(seconds=5)), listening=True, read_mono=time.monotonic(), read_clock=None)
    assert not held.parked(True), "a held queue waits for its timer"


def test_maintenance_with_the_look() -> None:
    """With the look on: fire_schedules at start, then left to the look;
    reap and rotate at their interval only while busy; all three every
    IDLE_MAINTENANCE; a failed look brings the intervals of old back."""
    m = Maintenance(5.0, 1.0, 100.0, look_every=1.0)
    assert m.fire_due(100.0)
    m.fired(100.0)
    assert m.look_due(101.0) and not m.fire_due(101.0), "the look covers the schedules"
    m.looked(101.0)
    assert not m.reap_due(105.0, busy=False) and m.next_reap == 110.0, "idle: no reap at its interval"
    assert m.reap_due(110.0, busy=True)
    assert not m.full_due(100.0 + IDLE_MAINTENANCE - 1) and m.full_due(100.0 + IDLE_MAINTENANCE)
    m.look_ok = False
    assert m.fire_due(200.0) and m.reap_due(200.0, busy=False)
    m.look_off()
    assert not m.look_due(1e9) and not m.full_due(1e9)
