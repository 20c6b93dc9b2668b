-- backoff._cron_next_wall(sets..., after): the first wall-clock time
-- (minute resolution) strictly after p_after that the parsed cron sets
-- match, or NULL when none does within 8 years (a leap day on a given
-- weekday repeats within that; "0 0 30 2 *" never does). Wall-clock means
-- local time without a zone: backoff._next_fire maps it to instants.
-- The cost is in days searched, not minutes: a month outside the set is
-- skipped whole, a day that does not match costs two look-ups, and the
-- first matching day returns at its first matching minute. Private.
CREATE OR REPLACE FUNCTION backoff._cron_next_wall(
    p_minutes  integer[],
    p_hours    integer[],
    p_days     integer[],
    p_months   integer[],
    p_weekdays integer[],
    p_days_or  boolean,
    p_after    timestamp
)
RETURNS timestamp
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_start timestamp := pg_catalog.date_trunc('minute', p_after) + interval '1 minute';
    v_day   date := v_start::date;
    v_end   date := v_start::date + 2923;
    -- The first minute of the day that may match (only the first day
    -- starts after midnight).
    v_from  integer := (extract(hour FROM v_start) * 60 + extract(minute FROM v_start))::integer;
    v_dom   boolean;
    v_dow   boolean;
    v_h     integer;
    v_m     integer;
BEGIN
    WHILE v_day < v_end LOOP
        IF NOT (extract(month FROM v_day)::integer = ANY (p_months)) THEN
            v_day := (pg_catalog.date_trunc('month', v_day) + interval '1 month')::date;
            v_from := 0;
            CONTINUE;
        END IF;
        v_dom := extract(day FROM v_day)::integer = ANY (p_days);
        v_dow := extract(dow FROM v_day)::integer = ANY (p_weekdays);
        IF (CASE WHEN p_days_or THEN v_dom OR v_dow ELSE v_dom AND v_dow END) THEN
            FOREACH v_h IN ARRAY p_hours LOOP
                CONTINUE WHEN v_h * 60 + 59 < v_from;
                FOREACH v_m IN ARRAY p_minutes LOOP
                    IF v_h * 60 + v_m >= v_from THEN
                        RETURN v_day + pg_catalog.make_time(v_h, v_m, 0);
                    END IF;
                END LOOP;
            END LOOP;
        END IF;
        v_day := v_day + 1;
        v_from := 0;
    END LOOP;
    RETURN NULL;
END
$$;
