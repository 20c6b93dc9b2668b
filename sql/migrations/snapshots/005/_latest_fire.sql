-- backoff._latest_fire(schedule, first, now): the schedule's latest slot at
-- or before p_now, given p_first, a slot at or before p_now (its next fire
-- time). What catch-up 'latest' fires after downtime (docs/adr/0063).
-- Private.
--
-- However many slots were missed, the cost stays small: a fixed interval
-- is arithmetic; for cron, a window ending at p_now doubles from one
-- minute until it holds a slot (or reaches p_first), then the slots in it
-- are walked forward. A window that doubled holds at most the slots of
-- twice the gap before p_now's latest slot, so an every-minute schedule
-- down for a year walks a few minutes, not half a million slots.
CREATE OR REPLACE FUNCTION backoff._latest_fire(p_schedule backoff.schedules, p_first timestamptz, p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_every bigint;
    v_span  interval := interval '1 minute';
    v_slot  timestamptz;
    v_next  timestamptz;
BEGIN
    IF p_schedule.every IS NOT NULL THEN
        v_every := backoff._interval_us(p_schedule.every);
        RETURN greatest(p_first, p_schedule.anchor
            + (pg_catalog.floor(extract(epoch FROM p_now - p_schedule.anchor) * 1000000 / v_every) * v_every)::bigint
              * interval '1 microsecond');
    END IF;
    LOOP
        IF p_now - v_span <= p_first THEN
            v_slot := p_first;
            EXIT;
        END IF;
        v_slot := backoff._next_fire(p_schedule, p_now - v_span);
        EXIT WHEN v_slot <= p_now;
        v_span := v_span * 2;
    END LOOP;
    LOOP
        v_next := backoff._next_fire(p_schedule, v_slot);
        EXIT WHEN v_next IS NULL OR v_next > p_now;
        v_slot := v_next;
    END LOOP;
    RETURN v_slot;
END
$$;
