-- backoff._note_maintenance(task, worker, now): record that a maintenance
-- call (reap, rotate, fire_schedules; 'truncate' when rotate truncated a
-- segment) ran at p_now, and that p_worker (when not NULL) made it, for
-- backoff.liveness (docs/adr/0079). A row updated by every caller at every
-- call would keep a dead version per call while any snapshot is held, so
-- each row is written at most once every 15 seconds: the check is a read,
-- the write happens only when the stored time is older, and a row another
-- caller is writing is passed by (SKIP LOCKED), so no caller waits. A time
-- never moves back (a caller whose clock is behind writes nothing). A
-- 'truncate' is written whenever rotate truncates, which is rare. A
-- worker's row is inserted once; when a new worker appears, rows of
-- workers not seen for a day are deleted. Private: the maintenance calls,
-- SECURITY DEFINER, call it as the tables' owner.
CREATE OR REPLACE FUNCTION backoff._note_maintenance(
    p_task   text,
    p_worker text,
    p_now    timestamptz
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_every constant interval := interval '15 seconds';
    v_new   boolean;
BEGIN
    UPDATE backoff.maintenance AS m
    SET ran_at = p_now
    WHERE m.task = (SELECT t.task FROM backoff.maintenance AS t
                    WHERE t.task = p_task
                      AND (t.ran_at IS NULL OR t.ran_at < p_now - CASE WHEN p_task = 'truncate' THEN interval '0' ELSE v_every END)
                    FOR UPDATE SKIP LOCKED);
    IF p_worker IS NULL
       OR EXISTS (SELECT FROM backoff.maintenance_workers AS w
                  WHERE w.worker = p_worker AND w.seen_at >= p_now - v_every) THEN
        RETURN;
    END IF;
    INSERT INTO backoff.maintenance_workers AS w (worker, seen_at)
    VALUES (p_worker, p_now)
    ON CONFLICT (worker) DO UPDATE SET seen_at = GREATEST(w.seen_at, excluded.seen_at)
    RETURNING w.xmax = 0 INTO v_new;
    IF v_new THEN
        DELETE FROM backoff.maintenance_workers AS w WHERE w.seen_at < p_now - interval '1 day';
    END IF;
END
$$;
