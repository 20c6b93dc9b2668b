-- backoff._record_outputs(ids, queues, outputs, now): record the outputs
-- of jobs that have just completed, after checking each against its
-- queue's limit (backoff._check_output; the error undoes the completion).
-- NULL outputs record nothing. An output kept from before (a job replayed
-- and completed again) is replaced: the latest completion is the job's
-- result. Private; complete and complete_many call it only when an output
-- was given.
CREATE OR REPLACE FUNCTION backoff._record_outputs(
    p_ids     bigint[],
    p_queues  text[],
    p_outputs jsonb[],
    p_now     timestamptz
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    PERFORM backoff._check_output(t.queue, t.output)
    FROM unnest(p_queues, p_outputs) AS t(queue, output)
    WHERE pg_catalog.pg_column_size(t.output) > 1024;
    INSERT INTO backoff.job_outputs AS o (job_id, output, recorded_at)
    SELECT t.id, t.output, p_now
    FROM unnest(p_ids, p_outputs) AS t(id, output)
    WHERE t.output IS NOT NULL
    ON CONFLICT (job_id) DO UPDATE SET output = excluded.output, recorded_at = excluded.recorded_at;
END
$$;
