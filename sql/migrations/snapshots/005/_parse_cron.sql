-- backoff._parse_cron(expression): a 5-field cron expression (minute hour
-- day-of-month month day-of-week) as the sets backoff.schedules stores, or
-- 22023 naming the expression and what is wrong with it
-- (docs/adr/0063). Also accepted: the macros @yearly (@annually),
-- @monthly, @weekly, @daily (@midnight) and @hourly, and three-letter
-- English month and weekday names. Weekday 7 is Sunday, stored as 0.
-- days_or is cron's rule for the two day fields: when both are restricted
-- (neither starts with *), a day matching either one matches.
-- fixed_time: neither the minute nor the hour field starts with *; such a
-- schedule names wall-clock times, which daylight saving may skip or
-- repeat (backoff._wall_instants). Private.
CREATE OR REPLACE FUNCTION backoff._parse_cron(
    p_expression text,
    OUT minutes    integer[],
    OUT hours      integer[],
    OUT days       integer[],
    OUT months     integer[],
    OUT weekdays   integer[],
    OUT days_or    boolean,
    OUT fixed_time boolean
)
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_text   text := pg_catalog.lower(pg_catalog.btrim(coalesce(p_expression, ''), E' \t\n\r'));
    v_fields text[];
    v_names  text[];
BEGIN
    IF p_expression IS NULL OR octet_length(p_expression) > 256 THEN
        RAISE EXCEPTION 'cron "%": want 5 fields of at most 256 bytes in all (minute hour day-of-month month day-of-week)',
            coalesce(pg_catalog.left(p_expression, 64), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_text := CASE v_text
        WHEN '@yearly' THEN '0 0 1 1 *' WHEN '@annually' THEN '0 0 1 1 *'
        WHEN '@monthly' THEN '0 0 1 * *' WHEN '@weekly' THEN '0 0 * * 0'
        WHEN '@daily' THEN '0 0 * * *' WHEN '@midnight' THEN '0 0 * * *'
        WHEN '@hourly' THEN '0 * * * *' ELSE v_text END;
    v_fields := pg_catalog.regexp_split_to_array(v_text, '\s+');
    IF v_text = '' OR pg_catalog.cardinality(v_fields) <> 5 THEN
        RAISE EXCEPTION 'cron "%": want 5 fields (minute hour day-of-month month day-of-week), got %',
            p_expression, CASE WHEN v_text = '' THEN 0 ELSE pg_catalog.cardinality(v_fields) END
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_names := ARRAY['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
    FOR v_i IN 1..12 LOOP
        v_fields[4] := pg_catalog.regexp_replace(v_fields[4], '\m' || v_names[v_i] || '\M', v_i::text, 'g');
    END LOOP;
    v_names := ARRAY['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];
    FOR v_i IN 1..7 LOOP
        v_fields[5] := pg_catalog.regexp_replace(v_fields[5], '\m' || v_names[v_i] || '\M', (v_i - 1)::text, 'g');
    END LOOP;
    minutes  := backoff._cron_field(p_expression, v_fields[1], 'minute', 0, 59);
    hours    := backoff._cron_field(p_expression, v_fields[2], 'hour', 0, 23);
    days     := backoff._cron_field(p_expression, v_fields[3], 'day-of-month', 1, 31);
    months   := backoff._cron_field(p_expression, v_fields[4], 'month', 1, 12);
    weekdays := backoff._cron_field(p_expression, v_fields[5], 'day-of-week', 0, 7);
    weekdays := ARRAY(SELECT DISTINCT w % 7 FROM pg_catalog.unnest(weekdays) AS w ORDER BY 1);
    days_or := pg_catalog.left(v_fields[3], 1) <> '*' AND pg_catalog.left(v_fields[5], 1) <> '*';
    fixed_time := pg_catalog.left(v_fields[1], 1) <> '*' AND pg_catalog.left(v_fields[2], 1) <> '*';
END
$$;
