-- backoff.fire_schedules(limit, now): enqueue one job for every slot due at
-- p_now and advance each schedule past it (docs/adr/0063, docs/adr/0076).
-- Any number of callers may run it at any moment, with no leader and with
-- clocks that differ by up to backoff.settings.max_clock_skew: a due
-- schedule's row is locked FOR UPDATE, waiting for a caller that holds it,
-- in the order of the schedules' names (so two callers never wait for each
-- other in a cycle), and once the holder committed the waiter sees its
-- next fire time and fires what is still due on its own clock. The next
-- fire time moves past the slots handled before the lock is released, so a
-- slot is enqueued once; a job records its schedule and slot, and each
-- partition's unique index on the two refuses a second insert of a slot
-- there (an index cannot span the partitions of backoff.jobs,
-- docs/adr/0061). Under REPEATABLE READ or SERIALIZABLE a row another
-- caller changed meanwhile raises 40001 (the clients retry).
-- catch_up 'latest' passes a slot over (and counts it in missed) only when
-- its interval ended max_clock_skew or more before p_now: a slot that may
-- still be the current one on another caller's clock fires. The window
-- passes over (and counts) the slots older than it.
-- With nothing due it is one probe of schedules_due_idx, so a worker can
-- call it in its loop. The jobs are inserted by one set-based INSERT with
-- enqueue's policy rule (backoff._governing_policy) and its wake-ups (a
-- NOTIFY per queue with a waiting worker). A caller scoped by
-- backoff.grant_queue fires only the schedules of queues it may work on or
-- produce into, and one without any grant (require_queue_grants) none,
-- as backoff._queue_scope decides everywhere; what it enqueues was written
-- by an admin. A caller outside backoff_admin fires at most 1000 jobs per
-- call, whatever p_limit says.
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
    v_keep         timestamptz;
    v_tail         timestamptz[];
    v_slot         timestamptz;
    v_next         timestamptz;
    v_skew         interval;
    v_running      boolean;
    v_missed       bigint;
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
    -- A worker's call stays short: at most 1000 jobs (about a third of a
    -- second); the rest fire at its next call.
    IF v_left > 1000 AND NOT pg_catalog.pg_has_role(
            coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user::text), 'backoff_admin', 'MEMBER') THEN
        v_left := 1000;
    END IF;
    -- NULL for an unscoped caller (both are NULL then); empty for a caller
    -- without any grant while grants are required (docs/adr/0058).
    v_scope := backoff._queue_scope('work') || backoff._queue_scope('produce');
    FOR v_s IN
        SELECT *
        FROM backoff.schedules AS s
        WHERE NOT s.paused AND s.next_fire_at <= p_now
          AND (v_scope IS NULL OR s.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
          -- A queue moving away fires on its new shard (docs/adr/0092).
          AND NOT EXISTS (SELECT FROM backoff.queue_moves AS m WHERE m.queue = s.queue AND m.direction = 'out')
        ORDER BY s.name
        LIMIT v_left
        FOR UPDATE
    LOOP
        EXIT WHEN v_left <= 0;
        v_from := v_s.next_fire_at;
        v_missed := 0;
        v_fired := 0;
        v_skipped := 0;
        v_last_skipped := NULL;
        v_slot := NULL;
        -- Slots older than the catch-up window are passed over.
        IF v_s.catch_up_window IS NOT NULL AND v_from < p_now - v_s.catch_up_window THEN
            v_next := backoff._next_fire(v_s, p_now - v_s.catch_up_window - interval '1 microsecond');
            v_missed := backoff._count_fires(v_s, v_from, p_now - v_s.catch_up_window);
            v_from := v_next;
        END IF;
        -- 'latest': the slots whose interval ended max_clock_skew or more
        -- before p_now are passed over; the others fire, the latest always:
        -- from the slot whose interval holds p_now - max_clock_skew on, at
        -- most catch_up_limit of them (the latest).
        IF v_s.catch_up = 'latest' AND v_from <= p_now THEN
            IF v_skew IS NULL THEN
                SELECT st.max_clock_skew INTO v_skew FROM backoff.settings AS st;
                v_skew := coalesce(v_skew, interval '5 minutes');
            END IF;
            v_keep := v_from;
            IF v_from <= p_now - v_skew THEN
                v_keep := backoff._latest_fire(v_s, v_from, p_now - v_skew);
            END IF;
            -- At most catch_up_limit of them, the latest ones.
            v_slot := backoff._latest_fire(v_s, v_keep, p_now);
            IF v_s.every IS NOT NULL THEN
                v_keep := greatest(v_keep, v_slot - (v_s.catch_up_limit - 1) * v_s.every);
            ELSE
                -- A cron slot is a minute or more after the one before:
                -- max_clock_skew in minutes at most (5 by default).
                v_tail := ARRAY[v_keep];
                WHILE v_tail[pg_catalog.cardinality(v_tail)] < v_slot LOOP
                    v_tail := v_tail || backoff._next_fire(v_s, v_tail[pg_catalog.cardinality(v_tail)]);
                END LOOP;
                v_keep := v_tail[greatest(1, pg_catalog.cardinality(v_tail) - v_s.catch_up_limit + 1)];
            END IF;
            v_missed := v_missed + backoff._count_fires(v_s, v_from, v_keep);
            -- With skip_if_running one of them could run: the latest; the
            -- ones before it are skipped.
            IF v_s.skip_if_running AND v_keep < v_slot THEN
                v_skipped := backoff._count_fires(v_s, v_keep, v_slot);
                v_last_skipped := backoff._latest_fire(v_s, v_keep, v_slot - interval '1 microsecond');
                v_keep := v_slot;
            END IF;
            v_from := v_keep;
            v_slot := NULL;
        END IF;
        IF v_from IS NULL OR v_from > p_now THEN
            v_next := v_from;
        ELSE
            -- Each slot in turn, oldest first, at most catch_up_limit per
            -- call and p_limit in all; the next call goes on from v_next.
            v_running := v_s.skip_if_running
                         AND EXISTS (SELECT FROM backoff.jobs AS j
                                     WHERE j.schedule = v_s.name AND j.status IN ('pending', 'running', 'retrying', 'blocked'));
            v_slot := v_from;
            LOOP
                IF v_running THEN
                    v_skipped := v_skipped + 1;
                    v_last_skipped := greatest(v_last_skipped, v_slot);
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
            missed = s.missed + v_missed,
            last_skipped_slot = coalesce(v_last_skipped, s.last_skipped_slot),
            last_missed_at = CASE WHEN v_missed > 0 THEN p_now ELSE s.last_missed_at END
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
'Fire every schedule due at p_now: for each slot due, enqueue one job (the schedule''s queue, payload, policy, priority and max attempts; run_at is the slot; backoff.jobs.schedule and schedule_slot name them) and advance the schedule past it. Returns one row per job enqueued: the schedule, the slot, the job id. Call it from any number of workers, cron jobs or pg_cron at any time, on clocks that differ by up to backoff.settings.max_clock_skew: a slot is enqueued once, whoever calls and however often, and every slot fires while some caller calls within its interval (a due schedule is locked, waiting for a caller that holds it, in name order, and moved past the slots it fires before the lock is released; under REPEATABLE READ or SERIALIZABLE a schedule another caller fired meanwhile raises 40001: retry). With nothing due it costs one index probe. Missed slots follow the schedule''s catch_up: ''latest'' fires the latest slot due and every earlier one whose interval ended less than max_clock_skew before p_now (it may still be the current slot on another caller''s clock), oldest first (with skip_if_running only the latest: the others are skipped), and passes over the older ones; ''all'' fires each; either at most catch_up_limit per schedule per call. catch_up_window passes over the slots older than it. Every slot passed over is counted in the schedule''s missed (last_missed_at: the p_now that passed some over). A p_now before a schedule''s next fire time fires nothing of it, so a clock that goes back repeats nothing. A schedule with skip_if_running and an unfinished job skips its slot (counted in skipped, last_skipped_slot). At most p_limit (1 to 100000, default 1000) jobs per call, and at most 1000 for a caller outside backoff_admin; the rest fire at the next call. Paused schedules fire nothing. A caller scoped by backoff.grant_queue fires only the schedules of the queues it may work on or produce into; one without any grant while backoff.settings.require_queue_grants is on fires none. Notifies channel backoff_jobs once per queue with a waiting worker (backoff.wait_for_jobs).
The schedules of a queue moving away from this shard (backoffctl shards move, docs/adr/0092) are passed over: they fire on its new shard.
Errors: 22023 for a limit outside 1-100000, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.put_schedule(''heartbeat'', ''pings'', p_every => ''5 minutes'', p_now => ''2026-01-01 00:00+00'');
SELECT backoff.put_schedule(''sweep'', ''pings'', p_every => ''5 minutes'', p_catch_up => ''all'', p_now => ''2026-01-01 00:00+00'');
SELECT schedule, slot FROM backoff.fire_schedules(p_now => ''2026-01-01 00:12+00'');';
