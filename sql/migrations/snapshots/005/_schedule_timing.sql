-- backoff._schedule_timing(cron, every, time_zone, anchor): a
-- backoff.schedules row with only its timing filled in (cron and its
-- parsed sets, or every and anchor; the time zone), checked; 22023 naming
-- the value otherwise (docs/adr/0063). Exactly one of p_cron and p_every.
-- The time zone must be a name of the IANA database as PostgreSQL knows it
-- (backoff._is_zone_name): a POSIX string such as 'UTC+3' (three hours WEST
-- of Greenwich) or an abbreviation such as 'CEST' (no daylight saving
-- rules) is refused. p_anchor NULL is 1970-01-01 00:00 UTC, so that an interval
-- that divides a day fires on round times ('1 hour' on the hour). Private;
-- put_schedule and schedule_fires share it, so a preview is the schedule.
CREATE OR REPLACE FUNCTION backoff._schedule_timing(
    p_cron      text,
    p_every     interval,
    p_time_zone text,
    p_anchor    timestamptz
)
RETURNS backoff.schedules
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_s backoff.schedules;
BEGIN
    IF (p_cron IS NULL) = (p_every IS NULL) THEN
        RAISE EXCEPTION 'a schedule needs exactly one of a cron expression and an interval, got cron "%" and interval "%"',
            coalesce(p_cron, 'NULL'), coalesce(p_every::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_time_zone IS NULL OR octet_length(p_time_zone) > 64
       OR NOT backoff._is_zone_name(p_time_zone) THEN
        RAISE EXCEPTION 'time zone "%" is not a name of the IANA time zone database (such as UTC or Europe/Berlin)',
            coalesce(pg_catalog.left(p_time_zone, 64), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_s.time_zone := p_time_zone;
    IF p_every IS NOT NULL THEN
        IF extract(month FROM p_every) <> 0 OR extract(year FROM p_every) <> 0
           OR p_every < interval '1 second' OR p_every > interval '876600 hours' THEN
            RAISE EXCEPTION 'interval "%" must be 1 second to 876600 hours, in days, hours, minutes and seconds (a month has no fixed length)', p_every
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF NOT (p_anchor >= '0001-01-01 00:00:00+00'::timestamptz AND p_anchor < '10000-01-01 00:00:00+00'::timestamptz) THEN
            RAISE EXCEPTION 'anchor must be a finite time in years 1 to 9999, got "%"', p_anchor
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- A day counts as 24 hours: an interval schedule runs by elapsed
        -- time, whatever the zone's clock does.
        v_s.every := p_every;
        v_s.anchor := coalesce(p_anchor, '1970-01-01 00:00:00+00'::timestamptz);
        RETURN v_s;
    END IF;
    IF p_anchor IS NOT NULL THEN
        RAISE EXCEPTION 'an anchor applies to an interval schedule, not to cron "%"', p_cron
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_s.cron := p_cron;
    SELECT c.minutes, c.hours, c.days, c.months, c.weekdays, c.days_or, c.fixed_time
    INTO v_s.minutes, v_s.hours, v_s.days, v_s.months, v_s.weekdays, v_s.days_or, v_s.fixed_time
    FROM backoff._parse_cron(p_cron) AS c;
    RETURN v_s;
END
$$;
