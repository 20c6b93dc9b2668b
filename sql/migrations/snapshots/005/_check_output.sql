-- backoff._check_output(queue, output): 22023 when a job's output is
-- larger than its queue's limit (backoff.queues.max_output_bytes, else
-- backoff.settings.max_output_bytes, 1 MiB by default), naming its size
-- and the limit. The size is the jsonb's uncompressed size, as for
-- payloads (backoff._check_payload). Private; complete and complete_many
-- call it only for an output over 1 KiB, the smallest limit allowed, so a
-- small output costs no read of the settings.
CREATE OR REPLACE FUNCTION backoff._check_output(p_queue text, p_output jsonb)
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_max  integer;
    v_size integer := pg_catalog.pg_column_size(p_output);
BEGIN
    SELECT coalesce((SELECT q.max_output_bytes FROM backoff.queues AS q WHERE q.name = p_queue),
                    (SELECT s.max_output_bytes FROM backoff.settings AS s),
                    1048576)
    INTO v_max;
    IF v_size > v_max THEN
        RAISE EXCEPTION 'output is % bytes, over max_output_bytes of queue "%" (% bytes)', v_size, p_queue, v_max
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'store large results elsewhere and return a reference to them; an admin sets the limit in backoff.queues or backoff.settings';
    END IF;
END
$$;
