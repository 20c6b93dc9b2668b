-- backoff._move_to_current_segment(ids, release): move the live jobs
-- (blocked ones too) among p_ids that are outside the current segment into
-- it (docs/adr/0061); returns how many it moved. With p_release, only the
-- blocked ones, which become pending as they move (backoff._release_blocked:
-- one row written, not an UPDATE and then a move). Private.
--
-- complete, complete_many, fail, heartbeat and snooze look for a job in the
-- current segment only, a statement whose other segments are pruned when
-- it is planned, so that it locks and opens one segment's partition. A job
-- they do not find there may be elsewhere: claimed before a switch and not
-- moved yet (rotate skips rows a worker holds), or acquired where a hand
-- INSERT put it, segment 0 included. They call this and run their
-- statement again: one statement per call, not a second copy of each.
-- It waits for a row another transaction holds, as the caller would;
-- backoff.rotate, which waits for nobody, moves only rows it has locked
-- with FOR UPDATE SKIP LOCKED.
CREATE OR REPLACE FUNCTION backoff._move_to_current_segment(p_ids bigint[], p_release boolean DEFAULT false)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
-- Planned once, generic: a custom plan of a statement on every segment is
-- planned again at each call and locks every index of every segment.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_moved bigint;
BEGIN
    WITH m AS (
        DELETE FROM backoff.jobs AS j
        WHERE j.id = ANY (p_ids)
          AND j.segment <> backoff._current_segment()
          AND j.status IN ('pending', 'running', 'retrying', 'blocked')
          AND (NOT p_release OR j.status = 'blocked')
        RETURNING j.*
    )
    INSERT INTO backoff.jobs AS j (id, queue, payload, status, priority, attempts, max_attempts, policy, run_at,
                                   lease_until, locked_by, last_attempted_at, last_failed_at, last_error, errors,
                                   dead_letter_reason, dedupe_key, created_at, completed_at, uncounted_attempts,
                                   lease_expiries, schedule, schedule_slot, segment)
    OVERRIDING SYSTEM VALUE
    SELECT m.id, m.queue, m.payload, CASE WHEN p_release THEN 'pending' ELSE m.status END, m.priority, m.attempts, m.max_attempts, m.policy, m.run_at,
           m.lease_until, m.locked_by, m.last_attempted_at, m.last_failed_at, m.last_error, m.errors,
           m.dead_letter_reason, m.dedupe_key, m.created_at, m.completed_at, m.uncounted_attempts,
           m.lease_expiries, m.schedule, m.schedule_slot, backoff._current_segment()
    FROM m;
    GET DIAGNOSTICS v_moved = ROW_COUNT;
    RETURN v_moved;
END
$$;
