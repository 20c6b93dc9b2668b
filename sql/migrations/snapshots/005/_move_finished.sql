-- backoff._move_finished(ids): move the finished jobs among p_ids that are
-- still in a live segment to the finished partition (segment 0) in one
-- statement, a DELETE feeding an INSERT, never a cross-partition UPDATE (a
-- concurrent locker of a row moved by UPDATE gets a serialization error; of
-- a deleted row it skips it), and release their dedupe keys. fail and reap
-- decide a dead letter with the UPDATE that also decides a retry, then move
-- it with this (docs/adr/0061). The INSERT names the finished partition,
-- as every move into it does: routed through backoff.jobs, each statement
-- would set up the routing to it again. Returns the moved rows. Private.
CREATE OR REPLACE FUNCTION backoff._move_finished(p_ids bigint[])
RETURNS SETOF backoff.jobs
LANGUAGE sql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    WITH d AS (
        DELETE FROM backoff.jobs AS j
        WHERE j.id = ANY (p_ids)
          AND j.segment <> 0
          AND j.status IN ('completed', 'dead_lettered', 'cancelled')
        RETURNING j.*
    ), k AS (
        DELETE FROM backoff.dedupe_keys AS k
        WHERE k.queue = ANY (ARRAY(SELECT d.queue FROM d WHERE d.dedupe_key IS NOT NULL))
          AND k.dedupe_key = ANY (ARRAY(SELECT d.dedupe_key FROM d WHERE d.dedupe_key IS NOT NULL))
          AND k.job_id = ANY (ARRAY(SELECT d.id FROM d WHERE d.dedupe_key IS NOT NULL))
    )
    INSERT INTO backoff.jobs_finished AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                            lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                            dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                            lease_expiries, schedule, schedule_slot, segment)
    OVERRIDING SYSTEM VALUE
    SELECT d.id, d.queue, d.payload, d.status, d.priority, d.attempts, d.max_attempts, d.policy, d.run_at,
           d.lease_until, d.locked_by, d.last_attempted_at, d.last_failed_at, d.last_error, d.errors,
           d.dead_letter_reason, d.dedupe_key, d.created_at, d.completed_at, d.uncounted_attempts,
           d.lease_expiries, d.schedule, d.schedule_slot, 0
    FROM d
    RETURNING j.*
$$;
