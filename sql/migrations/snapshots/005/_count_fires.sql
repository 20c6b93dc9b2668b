-- backoff._count_fires(schedule, from, to): how many slots the schedule
-- has at or after p_from and before p_to: what fire_schedules adds to a
-- schedule's missed counter when it passes those slots over
-- (docs/adr/0076). Private.
--
-- Exact, at a cost that stays small however long the outage: a fixed
-- interval is arithmetic. A cron schedule is walked slot by slot
-- (backoff._next_fire) over the partial local day at each end; the local
-- days in between are counted from the parsed sets, each matching day
-- holding every hour times every minute of the sets, when the zone's
-- offset is the same from 3 hours before the day to 3 hours after it (then
-- each of its wall times is exactly one slot of that day, as in
-- _next_fire's fast path); a day next to an offset change is walked. A
-- year of an every-minute schedule counts 365 days and walks a few.
CREATE OR REPLACE FUNCTION backoff._count_fires(p_schedule backoff.schedules, p_from timestamptz, p_to timestamptz)
RETURNS bigint
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_zone  text := p_schedule.time_zone;
    v_every numeric;
    v_n     bigint := 0;
    v_at    timestamptz;
    v_first date;
    v_last  date;
    v_day   date;
    v_start timestamptz;
    v_end   timestamptz;
    v_per   bigint;
BEGIN
    IF p_from IS NULL OR p_to IS NULL OR p_to <= p_from THEN
        RETURN 0;
    END IF;
    IF p_schedule.every IS NOT NULL THEN
        -- k with p_from <= anchor + k * every < p_to.
        v_every := backoff._interval_us(p_schedule.every);
        RETURN (pg_catalog.ceil(extract(epoch FROM p_to - p_schedule.anchor) * 1000000 / v_every)
                - pg_catalog.ceil(extract(epoch FROM p_from - p_schedule.anchor) * 1000000 / v_every))::bigint;
    END IF;
    -- Whole local days from v_first to v_last are counted; the rest walked.
    v_first := (p_from AT TIME ZONE v_zone)::date + 1;
    v_last := (p_to AT TIME ZONE v_zone)::date - 1;
    IF v_last < v_first THEN
        v_first := NULL;
        v_start := p_to;
    ELSE
        v_start := v_first::timestamp AT TIME ZONE v_zone;
        v_end := (v_last + 1)::timestamp AT TIME ZONE v_zone;
    END IF;
    -- The slots before the counted days (or all of them).
    v_at := backoff._next_fire(p_schedule, p_from - interval '1 microsecond');
    WHILE v_at < v_start LOOP
        v_n := v_n + 1;
        v_at := backoff._next_fire(p_schedule, v_at);
    END LOOP;
    IF v_first IS NULL THEN
        RETURN v_n;
    END IF;
    v_per := pg_catalog.cardinality(p_schedule.hours)::bigint * pg_catalog.cardinality(p_schedule.minutes);
    FOR v_day IN SELECT d::date FROM pg_catalog.generate_series(v_first, v_last, interval '1 day') AS d LOOP
        v_start := v_day::timestamp AT TIME ZONE v_zone;
        v_end := (v_day + 1)::timestamp AT TIME ZONE v_zone;
        IF backoff._utc_offset(v_start - interval '3 hours', v_zone) = backoff._utc_offset(v_end + interval '3 hours', v_zone) THEN
            IF extract(month FROM v_day)::integer = ANY (p_schedule.months)
               AND (CASE WHEN p_schedule.days_or
                         THEN extract(day FROM v_day)::integer = ANY (p_schedule.days)
                              OR extract(dow FROM v_day)::integer = ANY (p_schedule.weekdays)
                         ELSE extract(day FROM v_day)::integer = ANY (p_schedule.days)
                              AND extract(dow FROM v_day)::integer = ANY (p_schedule.weekdays) END) THEN
                v_n := v_n + v_per;
            END IF;
        ELSE
            v_at := backoff._next_fire(p_schedule, v_start - interval '1 microsecond');
            WHILE v_at < v_end LOOP
                v_n := v_n + 1;
                v_at := backoff._next_fire(p_schedule, v_at);
            END LOOP;
        END IF;
    END LOOP;
    -- The slots after them.
    v_at := backoff._next_fire(p_schedule, v_end - interval '1 microsecond');
    WHILE v_at < p_to LOOP
        v_n := v_n + 1;
        v_at := backoff._next_fire(p_schedule, v_at);
    END LOOP;
    RETURN v_n;
END
$$;
