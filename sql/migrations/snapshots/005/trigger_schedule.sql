-- backoff.trigger_schedule(name, now): enqueue one job of the schedule
-- p_name now, out of turn (docs/adr/0068). The job is the one a slot would
-- enqueue (queue, payload, policy rule, priority, max attempts) and names
-- the schedule with no slot: a manual fire. The schedule is not moved (its
-- next fire time, last slot and counters stay), a pause does not stop it
-- (an operator may run a paused schedule by hand), and the unique index on
-- (schedule, schedule_slot) lets any number of manual fires coexist with
-- the slots. A set of at most one row, so that behind a router every shard
-- is asked and only the one that holds the schedule answers. Admin only.
CREATE OR REPLACE FUNCTION backoff.trigger_schedule(p_name text, p_now timestamptz DEFAULT now())
RETURNS TABLE (schedule text, job_id bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
BEGIN
    p_now := backoff._now(p_now);
    RETURN QUERY
    -- Into the current segment, as every enqueue (docs/adr/0061).
    INSERT INTO backoff.jobs AS j (queue, payload, priority, max_attempts, policy, run_at, created_at,
                                   schedule, schedule_slot, segment)
    SELECT s.queue, s.payload, s.priority, s.max_attempts, g.name, p_now, p_now, s.name, NULL,
           backoff._current_segment()
    FROM backoff.schedules AS s
    CROSS JOIN LATERAL backoff._governing_policy(s.policy, s.queue) AS g
    WHERE s.name = p_name
    RETURNING j.schedule, j.id;
    IF FOUND THEN
        PERFORM pg_catalog.pg_notify('backoff_jobs', w.queue)
        FROM (SELECT DISTINCT w.queue FROM backoff.waiting_workers AS w
              JOIN backoff.schedules AS s ON s.queue = w.queue
              WHERE s.name = p_name AND w.expires_at > pg_catalog.now()) AS w;
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.trigger_schedule(text, timestamptz) IS
'Enqueue one job of the schedule p_name now, out of turn: the job a slot would enqueue (the schedule''s queue, payload, policy, priority and max attempts), due at p_now, with backoff.jobs.schedule naming the schedule and schedule_slot NULL (a manual fire). The schedule itself is not moved: its next fire time, last slot and counters stay, and the next slot still fires. A paused schedule can be triggered. Returns the schedule and the new job''s id, or no row when no schedule has that name in this database. Notifies channel backoff_jobs when a worker waits for the queue. Admin only.
Errors: 22023 for a p_now that is infinite or outside years 1-9999.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'', p_now => ''2026-01-01 00:00+00'');
SELECT schedule, job_id > 0 AS enqueued FROM backoff.trigger_schedule(''nightly-report'', p_now => ''2026-01-01 09:15+00'');';
