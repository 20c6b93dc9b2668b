-- backoff._check_payload(payloads): 22023 when a payload is larger than
-- backoff.settings.max_payload_bytes (docs/adr/0059), naming its size, the
-- limit and, in a batch, its place. Private; enqueue calls it only for a
-- payload over 1 KiB (the smallest limit the setting allows) or one that
-- arrives compressed, so the common small payload costs no read of the
-- settings; the bulk enqueue calls it once for the whole batch.
--
-- The size is the payload's jsonb size, uncompressed: pg_column_size of an
-- element of an array, which PostgreSQL always holds decompressed (a
-- payload read from a table column reaches enqueue compressed, and its
-- compressed size would let a large, repetitive payload through). It is
-- what the value costs in memory and on the wire, within a few bytes of its
-- text.
CREATE OR REPLACE FUNCTION backoff._check_payload(p_payloads jsonb[])
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_max  integer;
    v_ord  bigint;
    v_size integer;
BEGIN
    -- A missing settings row means the column's default.
    SELECT s.max_payload_bytes INTO v_max FROM backoff.settings AS s;
    v_max := coalesce(v_max, 1048576);
    SELECT t.ord, pg_catalog.pg_column_size(t.payload) INTO v_ord, v_size
    FROM pg_catalog.unnest(p_payloads) WITH ORDINALITY AS t(payload, ord)
    WHERE pg_catalog.pg_column_size(t.payload) > v_max
    ORDER BY t.ord
    LIMIT 1;
    IF v_ord IS NULL THEN
        RETURN;
    END IF;
    IF pg_catalog.cardinality(p_payloads) = 1 THEN
        RAISE EXCEPTION 'payload is % bytes, over max_payload_bytes (% bytes)', v_size, v_max
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'store large data elsewhere and enqueue a reference to it; an admin sets the limit in backoff.settings';
    END IF;
    RAISE EXCEPTION 'payload % of the batch is % bytes, over max_payload_bytes (% bytes)', v_ord, v_size, v_max
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'store large data elsewhere and enqueue a reference to it; an admin sets the limit in backoff.settings';
END
$$;
