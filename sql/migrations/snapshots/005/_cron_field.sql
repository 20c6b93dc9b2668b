-- backoff._cron_field(expression, field, name, min, max): the values of one
-- field of a cron expression, sorted and distinct, or 22023 naming the
-- expression, the field and its allowed range (docs/adr/0063). A field is a
-- comma-separated list of items, each *, */n, a, a-b or a-b/n; month and
-- weekday fields also take three-letter English names (jan, mon), which
-- the caller has already replaced by numbers. Private; called when a
-- schedule is written or previewed, never when one fires.
CREATE OR REPLACE FUNCTION backoff._cron_field(
    p_expression text,
    p_field      text,
    p_name       text,
    p_min        integer,
    p_max        integer
)
RETURNS integer[]
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_item   text;
    v_parts  text[];
    v_lo     integer;
    v_hi     integer;
    v_step   integer;
    v_values integer[] := '{}';
    v_where  text := pg_catalog.format('cron "%s": %s field "%s"', p_expression, p_name, p_field);
BEGIN
    FOREACH v_item IN ARRAY pg_catalog.string_to_array(p_field, ',') LOOP
        IF v_item = '' THEN
            RAISE EXCEPTION '% has an empty list item', v_where
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- item = range [/ step]; range = * | a | a-b
        v_parts := pg_catalog.regexp_match(v_item, '^(\*|([0-9]{1,4})(?:-([0-9]{1,4}))?)(?:/([0-9]{1,4}))?$');
        IF v_parts IS NULL THEN
            RAISE EXCEPTION '% is not *, a number, a range a-b or a step (*/n, a-b/n) of numbers in %-%', v_where, p_min, p_max
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        IF v_parts[1] = '*' THEN
            v_lo := p_min;
            v_hi := p_max;
        ELSE
            v_lo := v_parts[2]::integer;
            v_hi := coalesce(v_parts[3]::integer, v_lo);
            IF v_lo < p_min OR v_lo > p_max OR v_hi < p_min OR v_hi > p_max THEN
                RAISE EXCEPTION '% is outside %-%', v_where, p_min, p_max
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            IF v_hi < v_lo THEN
                RAISE EXCEPTION '% has a range from high to low (%-%)', v_where, v_lo, v_hi
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END IF;
        v_step := coalesce(v_parts[4]::integer, 1);
        IF v_parts[4] IS NOT NULL AND (v_step < 1 OR v_step > p_max - p_min + 1) THEN
            RAISE EXCEPTION '% has step %, want 1-%', v_where, v_step, p_max - p_min + 1
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        -- "a/n" alone (no range) is not cron: "a-b/n" says where it ends.
        IF v_parts[4] IS NOT NULL AND v_parts[1] <> '*' AND v_parts[3] IS NULL THEN
            RAISE EXCEPTION '% has a step without a range (write %-%/%)', v_where, v_lo, p_max, v_step
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_values := v_values || ARRAY(SELECT pg_catalog.generate_series(v_lo, v_hi, v_step));
    END LOOP;
    RETURN ARRAY(SELECT DISTINCT v FROM pg_catalog.unnest(v_values) AS v ORDER BY v);
END
$$;
