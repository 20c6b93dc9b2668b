-- backoff._next_fire(schedule, after): the schedule's first slot strictly
-- after p_after, or NULL when it has none before year 10000
-- (docs/adr/0063). Private; the one answer to "when next", for
-- put_schedule, resume_schedule, fire_schedules and schedule_fires.
--
-- A fixed interval is arithmetic: slots are anchor + k * every for every
-- integer k, counted in microseconds.
-- A cron schedule: the next matching wall-clock time after p_after's local
-- time, mapped to its instant in the schedule's zone. That is exact when
-- the zone's offset does not change within 3 hours of p_after nor of the
-- answer (the fast path: every slot but those next to a daylight-saving
-- change). Otherwise the matching wall times around are walked in order
-- and each mapped by backoff._wall_instants, which applies the daylight
-- saving rules; the earliest instant after p_after wins.
CREATE OR REPLACE FUNCTION backoff._next_fire(p_schedule backoff.schedules, p_after timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_zone   text := p_schedule.time_zone;
    v_every  bigint;
    v_since  numeric;
    v_next   timestamptz;
    v_local  timestamp;
    v_wall   timestamp;
    v_best   timestamptz;
    v_at     timestamptz;
    v_steady boolean;
BEGIN
    IF p_after IS NULL THEN
        RETURN NULL;
    END IF;
    IF p_schedule.every IS NOT NULL THEN
        v_every := backoff._interval_us(p_schedule.every);
        v_since := extract(epoch FROM p_after - p_schedule.anchor) * 1000000;
        v_next := p_schedule.anchor
                  + ((pg_catalog.floor(v_since / v_every) + 1) * v_every)::bigint * interval '1 microsecond';
        RETURN CASE WHEN v_next < '10000-01-01 00:00:00+00'::timestamptz THEN v_next END;
    END IF;

    v_local := p_after AT TIME ZONE v_zone;
    v_steady := backoff._utc_offset(p_after - interval '3 hours', v_zone)
                = backoff._utc_offset(p_after + interval '3 hours', v_zone);
    IF v_steady THEN
        v_wall := backoff._cron_next_wall(p_schedule.minutes, p_schedule.hours, p_schedule.days,
                                          p_schedule.months, p_schedule.weekdays, p_schedule.days_or, v_local);
        IF v_wall IS NULL THEN
            RETURN NULL;
        END IF;
        v_next := v_wall AT TIME ZONE v_zone;
        IF backoff._utc_offset(v_next - interval '3 hours', v_zone)
           = backoff._utc_offset(v_next + interval '3 hours', v_zone) THEN
            RETURN CASE WHEN v_next < '10000-01-01 00:00:00+00'::timestamptz THEN v_next END;
        END IF;
        -- The answer is next to an offset change: walk from its wall time.
        v_wall := v_wall - interval '1 minute';
    ELSE
        -- p_after is next to an offset change: a wall time up to 3 hours
        -- before its local time may still occur after it (a repeated hour)
        -- or map past it (the end of a gap).
        v_wall := v_local - interval '3 hours';
    END IF;
    LOOP
        v_wall := backoff._cron_next_wall(p_schedule.minutes, p_schedule.hours, p_schedule.days,
                                          p_schedule.months, p_schedule.weekdays, p_schedule.days_or, v_wall);
        EXIT WHEN v_wall IS NULL;
        -- No later wall time maps before v_best: past 3 hours of local
        -- time after it, or when the offset is steady around it.
        EXIT WHEN v_best IS NOT NULL
                  AND (v_wall > (v_best AT TIME ZONE v_zone) + interval '3 hours'
                       OR backoff._utc_offset(v_best - interval '3 hours', v_zone)
                          = backoff._utc_offset(v_best + interval '3 hours', v_zone));
        FOREACH v_at IN ARRAY backoff._wall_instants(v_wall, v_zone, p_schedule.fixed_time) LOOP
            IF v_at > p_after AND (v_best IS NULL OR v_at < v_best) THEN
                v_best := v_at;
            END IF;
        END LOOP;
    END LOOP;
    RETURN CASE WHEN v_best < '10000-01-01 00:00:00+00'::timestamptz THEN v_best END;
END
$$;
