-- backoff._check_name(what, value): value itself when it is a name of 1 to
-- 128 bytes without control characters (C0, DEL, C1) or Unicode format
-- characters (general category Cf: zero-width characters, bidi marks,
-- embeddings, overrides and isolates, the byte order mark, tags);
-- otherwise 22023 naming the value with those characters escaped
-- (docs/adr/0039, docs/adr/0059), raised by backoff._bad_name. Private;
-- every function that stores a queue, policy, schedule, worker or dedupe
-- key, or works on a queue by name (claim, acquire, the waits, pause and
-- resume, queue_state, replay_dead_letters), checks it here; look-ups and
-- filters (list_jobs, count_jobs, the dead-letter reads, revoke_queue) do
-- not, as a name no row holds matches nothing there. So a stored name can
-- always be notified (NOTIFY payloads are limited to 8000 bytes), indexed,
-- replayed and printed on one terminal line, and two names that look the
-- same are the same name (a queue "emails" followed by a zero-width space
-- would sit unseen beside "emails").
--
-- A SQL function that PostgreSQL inlines: called as an assignment
-- (p_queue := backoff._check_name('queue', p_queue)) it is a PL/pgSQL
-- simple expression, evaluated without a query (a PERFORM would run one
-- through SPI on every call of the hot path).

-- backoff._bad_name_chars(): the characters a name may not hold, as one
-- bracket expression: C0 but NUL (which text cannot hold), DEL, C1, and
-- every Cf character of Unicode 15 (client.ValidName refuses the
-- same set; a test compares the two over every code point). A constant,
-- folded into the callers' plans.
CREATE OR REPLACE FUNCTION backoff._bad_name_chars()
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT '[\x01-\x1f\x7f\u0080-\u009f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001\U000e0020-\U000e007f]'::text
$$;

-- The error path: the first 64 characters of the value, each refused
-- character written as \uXXXX (\UXXXXXXXX above the BMP), so the message
-- shows what was refused without carrying it to a log or terminal.
CREATE OR REPLACE FUNCTION backoff._bad_name(p_what text, p_value text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_shown text;
BEGIN
    SELECT pg_catalog.string_agg(
               CASE
                   WHEN c.ch OPERATOR(pg_catalog.!~) backoff._bad_name_chars() THEN c.ch
                   WHEN pg_catalog.ascii(c.ch) > 65535
                       THEN '\U' || pg_catalog.lpad(pg_catalog.upper(pg_catalog.to_hex(pg_catalog.ascii(c.ch))), 8, '0')
                   ELSE '\u' || pg_catalog.lpad(pg_catalog.upper(pg_catalog.to_hex(pg_catalog.ascii(c.ch))), 4, '0')
               END, '' ORDER BY c.n)
    INTO v_shown
    FROM pg_catalog.regexp_split_to_table(pg_catalog.left(coalesce(p_value, 'NULL'), 64), '') WITH ORDINALITY AS c(ch, n);
    RAISE EXCEPTION '% must be 1 to 128 bytes without control or format characters, got "%" (% bytes)',
        p_what,
        coalesce(v_shown, '') || CASE WHEN pg_catalog.length(p_value) > 64 THEN '...' ELSE '' END,
        coalesce(pg_catalog.octet_length(p_value), 0)
        USING ERRCODE = 'invalid_parameter_value';
END
$$;

-- backoff._name_ok(value): whether value is such a name (false for NULL).
-- A hot path that checks several inputs tests them in one expression and
-- calls backoff._check_name only to raise (claim).
CREATE OR REPLACE FUNCTION backoff._name_ok(p_value text)
RETURNS boolean
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT coalesce(pg_catalog.octet_length(p_value) BETWEEN 1 AND 128
                    AND p_value OPERATOR(pg_catalog.!~) backoff._bad_name_chars(), false)
$$;

CREATE OR REPLACE FUNCTION backoff._check_name(p_what text, p_value text)
RETURNS text
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN backoff._name_ok(p_value) THEN p_value ELSE backoff._bad_name(p_what, p_value) END
$$;
