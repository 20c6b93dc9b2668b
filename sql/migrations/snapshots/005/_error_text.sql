-- backoff._error_text(text): an error text as it is stored in last_error
-- and in the history (ADR 0039): at most 8192 bytes; a longer text is
-- cut at a character boundary and ends with the marker
-- " [truncated: N bytes]" (N = the original size), so that 20 history
-- entries hold at most about 160 KiB whatever a worker sends. (NUL and
-- invalid UTF-8 cannot reach the server as text; the Go client replaces
-- them before sending.) Private; used by fail.
CREATE OR REPLACE FUNCTION backoff._error_text(p_error text)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_size integer := pg_catalog.octet_length(p_error);
    v_text text;
BEGIN
    IF v_size IS NULL OR v_size <= 8192 THEN
        RETURN p_error;
    END IF;
    -- 8192 bytes in all, marker included (the marker is under 40 bytes).
    v_text := pg_catalog.left(p_error, 8150);
    WHILE pg_catalog.octet_length(v_text) > 8150 LOOP
        -- A character is 1 to 4 bytes: dropping a quarter of the excess
        -- (at least one character) never overshoots by much.
        v_text := pg_catalog.left(v_text, pg_catalog.length(v_text)
            - greatest((pg_catalog.octet_length(v_text) - 8150 + 3) / 4, 1));
    END LOOP;
    RETURN v_text || ' [truncated: ' || v_size || ' bytes]';
END
$$;
