-- backoff._check_name(what, value): value itself when it is a name of 1 to
-- 128 bytes without control characters (C0, DEL, C1); otherwise 22023
-- naming the value (docs/reliability.md), raised by backoff._bad_name. Private;
-- every function that takes a queue, policy, worker or dedupe key checks it
-- here, so a name can always be notified (NOTIFY payloads are limited to
-- 8000 bytes), indexed, replayed and printed on one terminal line.
--
-- A SQL function that PostgreSQL inlines: called as an assignment
-- (p_queue := backoff._check_name('queue', p_queue)) it is a PL/pgSQL
-- simple expression, evaluated without a query (a PERFORM would run one
-- through SPI on every call of the hot path).
CREATE OR REPLACE FUNCTION backoff._bad_name(p_what text, p_value text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
BEGIN
    RAISE EXCEPTION '% must be 1 to 128 bytes without control characters, got "%" (% bytes)',
        p_what,
        pg_catalog.regexp_replace(pg_catalog.left(coalesce(p_value, 'NULL'), 64), '[\x01-\x1f\x7f\u0080-\u009f]', '?', 'g')
            || CASE WHEN pg_catalog.length(p_value) > 64 THEN '...' ELSE '' END,
        coalesce(pg_catalog.octet_length(p_value), 0)
        USING ERRCODE = 'invalid_parameter_value';
END
$$;

CREATE OR REPLACE FUNCTION backoff._check_name(p_what text, p_value text)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE
        WHEN pg_catalog.octet_length(p_value) BETWEEN 1 AND 128
             AND p_value OPERATOR(pg_catalog.!~) '[\x01-\x1f\x7f\u0080-\u009f]'
        THEN p_value
        ELSE backoff._bad_name(p_what, p_value)
    END
$$;
