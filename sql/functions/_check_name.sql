-- backoff._check_name(what, value): raise 22023 unless value is a name of
-- 1 to 128 bytes without control characters (C0, DEL, C1), naming the
-- value (DESIGN §11.4). Private; every function that takes a queue,
-- policy, worker or dedupe key checks it here, so a name can always be
-- notified (NOTIFY payloads are limited to 8000 bytes), indexed, replayed
-- and printed on one terminal line. The message shows at most 64
-- characters of the value with control characters as "?".
CREATE OR REPLACE FUNCTION backoff._check_name(p_what text, p_value text)
RETURNS void
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    IF pg_catalog.octet_length(p_value) BETWEEN 1 AND 128
       AND p_value OPERATOR(pg_catalog.!~) '[\x01-\x1f\x7f\u0080-\u009f]' THEN
        RETURN;
    END IF;
    RAISE EXCEPTION '% must be 1 to 128 bytes without control characters, got "%" (% bytes)',
        p_what,
        pg_catalog.regexp_replace(pg_catalog.left(coalesce(p_value, 'NULL'), 64), '[\x01-\x1f\x7f\u0080-\u009f]', '?', 'g')
            || CASE WHEN pg_catalog.length(p_value) > 64 THEN '...' ELSE '' END,
        coalesce(pg_catalog.octet_length(p_value), 0)
        USING ERRCODE = 'invalid_parameter_value';
END
$$;
