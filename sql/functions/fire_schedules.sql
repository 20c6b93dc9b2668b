-- backoff.fire_schedules(limit, now): enqueue one job for every slot due at
-- p_now and advance each schedule past it (docs/adr/0063). Any number of
-- callers may run it at any moment, with no leader: a due schedule's row
-- is locked FOR UPDATE SKIP LOCKED, so one caller handles it and the
-- others pass on to other schedules, and its next fire time moves past
-- the slots handled before the lock is released, so a slot is enqueued
-- once; a job records its schedule and slot, and each partition's unique
-- index on the two refuses a second insert of a slot there (an index
-- cannot span the partitions of backoff.jobs, docs/adr/0061).
-- With nothing due it is one probe of schedules_due_idx, so a worker can
-- call it in its loop. The jobs are inserted by one set-based INSERT with
-- enqueue's policy rule (backoff._governing_policy) and its wake-ups (a
-- NOTIFY per queue with a waiting worker). A caller scoped by
-- backoff.grant_queue fires only the schedules of queues it may work on or
-- produce into; what it enqueues was written by an admin.
CREATE OR REPLACE FUNCTION backoff.fire_schedules(
    p_limit integer DEFAULT 1000,
    p_now   timestamptz DEFAULT now()
)
RETURNS TABLE (schedule text, slot timestamptz, job_id bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
#variable_conflict use_column
DECLARE
    v_scope        text[];
    v_s            backoff.schedules;
    v_left         integer;
    v_names        text[] := '{}';
    v_slots        timestamptz[] := '{}';
    v_queues       text[] := '{}';
    v_from         timestamptz;
    v_slot         timestamptz;
    v_next         timestamptz;
    v_running      boolean;
    v_missed       boolean;
    v_fired        integer;
    v_skipped      integer;
    v_last_skipped timestamptz;
BEGIN
    p_now := backoff._now(p_now);
    -- That a firer ran, for backoff.liveness (at most a write every 15 s).
    PERFORM backoff._note_maintenance('fire_schedules', NULL, p_now);
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 100000 THEN
        RAISE EXCEPTION 'limit must be between 1 and 100000, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_left := p_limit;
    IF EXISTS (SELECT FROM backoff.queue_grants) THEN
        -- NULL for an unscoped caller (both are NULL then).
        v_scope := backoff._queue_scope('work') || backoff._queue_scope('produce');
    END IF;
    FOR v_s IN
        SELECT *
        FROM backoff.schedules AS s
        WHERE NOT s.paused AND s.next_fire_at <= p_now
          AND (v_scope IS NULL OR s.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
        ORDER BY s.next_fire_at
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    LOOP
        EXIT WHEN v_left <= 0;
        v_from := v_s.next_fire_at;
        v_missed := false;
        v_fired := 0;
        v_skipped := 0;
        v_last_skipped := NULL;
        v_slot := NULL;
        -- Slots older than the catch-up window are passed over.
        IF v_s.catch_up_window IS NOT NULL AND v_from < p_now - v_s.catch_up_window THEN
            v_from := backoff._next_fire(v_s, p_now - v_s.catch_up_window - interval '1 microsecond');
            v_missed := true;
        END IF;
        v_running := v_s.skip_if_running
                     AND EXISTS (SELECT FROM backoff.jobs AS j
                                 WHERE j.schedule = v_s.name AND j.status IN ('pending', 'running', 'retrying'));
        IF v_from IS NULL OR v_from > p_now THEN
            v_next := v_from;
        ELSIF v_s.catch_up = 'latest' THEN
            v_slot := backoff._latest_fire(v_s, v_from, p_now);
            v_missed := v_missed OR v_slot > v_from;
            IF v_running THEN
                v_skipped := 1;
                v_last_skipped := v_slot;
            ELSE
                v_names := v_names || v_s.name;
                v_slots := v_slots || v_slot;
                v_fired := 1;
            END IF;
            v_next := backoff._next_fire(v_s, v_slot);
        ELSE
            -- 'all': each slot in turn, at most catch_up_limit per call and
            -- p_limit in all; the next call goes on from v_next.
            v_slot := v_from;
            LOOP
                IF v_running THEN
                    v_skipped := v_skipped + 1;
                    v_last_skipped := v_slot;
                ELSE
                    v_names := v_names || v_s.name;
                    v_slots := v_slots || v_slot;
                    v_fired := v_fired + 1;
                    v_running := v_s.skip_if_running;
                END IF;
                v_next := backoff._next_fire(v_s, v_slot);
                EXIT WHEN v_next IS NULL OR v_next > p_now
                          OR v_fired + v_skipped >= v_s.catch_up_limit OR v_fired >= v_left;
                v_slot := v_next;
            END LOOP;
        END IF;
        IF v_fired > 0 THEN
            v_queues := v_queues || v_s.queue;
        END IF;
        v_left := v_left - v_fired;
        UPDATE backoff.schedules AS s
        SET next_fire_at = v_next,
            last_slot = coalesce(v_slot, s.last_slot),
            fired = s.fired + v_fired,
            skipped = s.skipped + v_skipped,
            last_skipped_slot = coalesce(v_last_skipped, s.last_skipped_slot),
            last_missed_at = CASE WHEN v_missed THEN p_now ELSE s.last_missed_at END
        WHERE s.name = v_s.name;
    END LOOP;

    IF pg_catalog.cardinality(v_names) = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY
    WITH ins AS (
        -- Into the current segment (docs/adr/0061). A unique index cannot
        -- span the partitions: each partition's on (schedule,
        -- schedule_slot) refuses a second job of a slot in that partition;
        -- across partitions the schedule's row lock, under which the slot
        -- fires and next_fire_at moves past it, is the guarantee.
        INSERT INTO backoff.jobs AS j (queue, payload, priority, max_attempts, policy, run_at, created_at,
                                       schedule, schedule_slot, segment)
        SELECT s.queue, s.payload, s.priority, s.max_attempts, g.name, f.at, p_now, s.name, f.at,
               backoff._current_segment()
        FROM unnest(v_names, v_slots) WITH ORDINALITY AS f(name, at, ord)
        JOIN backoff.schedules AS s ON s.name = f.name
        CROSS JOIN LATERAL backoff._governing_policy(s.policy, s.queue) AS g
        ORDER BY f.ord
        ON CONFLICT DO NOTHING
        RETURNING j.schedule, j.schedule_slot, j.id
    )
    SELECT ins.schedule, ins.schedule_slot, ins.id FROM ins ORDER BY ins.schedule_slot, ins.id;

    -- Every slot fired is due: wake the workers waiting for its queue.
    PERFORM pg_catalog.pg_notify('backoff_jobs', w.queue)
    FROM (SELECT DISTINCT w.queue FROM backoff.waiting_workers AS w
          WHERE w.queue = ANY (v_queues) AND w.expires_at > pg_catalog.now()) AS w;
END
$$;

COMMENT ON FUNCTION backoff.fire_schedules(integer, timestamptz) IS
'Fire every schedule due at p_now: for each slot due, enqueue one job (the schedule''s queue, payload, policy, priority and max attempts; run_at is the slot; backoff.jobs.schedule and schedule_slot name them) and advance the schedule past it. Returns one row per job enqueued: the schedule, the slot, the job id. Call it from any number of workers, cron jobs or pg_cron at any time: a slot is enqueued once, whoever calls and however often (a due schedule is locked with SKIP LOCKED and moved past the slots it fires before the lock is released). With nothing due it costs one index probe. Missed slots follow the schedule''s catch_up (''latest'': the latest fires, the others are skipped; ''all'': each fires, at most catch_up_limit per schedule per call) and catch_up_window; a p_now before a schedule''s next fire time fires nothing of it, so a clock that goes back repeats nothing. A schedule with skip_if_running and an unfinished job skips its slot (counted in skipped, last_skipped_slot). At most p_limit (1 to 100000, default 1000) jobs per call; the rest fire at the next call. Paused schedules fire nothing. A caller scoped by backoff.grant_queue fires only the schedules of the queues it may work on or produce into. Notifies channel backoff_jobs once per queue with a waiting worker (backoff.wait_for_jobs).
Errors: 22023 for a limit outside 1-100000, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.put_schedule(''heartbeat'', ''pings'', p_every => ''5 minutes'', p_now => ''2026-01-01 00:00+00'');
SELECT backoff.put_schedule(''sweep'', ''pings'', p_every => ''5 minutes'', p_catch_up => ''all'', p_now => ''2026-01-01 00:00+00'');
SELECT schedule, slot FROM backoff.fire_schedules(p_now => ''2026-01-01 00:12+00'');';
