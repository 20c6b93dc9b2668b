-- backoff.schedule_list(name, now): the schedules as an operator lists them
-- (backoffctl schedules list and show, the web UI's Schedules page): each
-- one's settings and counters, whether it is overdue at p_now (its next
-- fire time is past by more than its firing interval, the time from that
-- slot to the one after it: nothing has fired it for a whole interval, so
-- no firer is running for its queue, docs/adr/0076), with the job of its latest slot, found by
-- one backward step of the index of a schedule's slots (manual fires have
-- no slot and are not slots; a pruned job leaves none). A function rather
-- than the client's SELECT, as the other operator reads are
-- (docs/adr/0072): psql and every language read the same, and behind a
-- router each shard answers for the schedules it holds, with its own
-- jobs, instead of a join of views that fetches every shard's whole job
-- table. The optional name is a static filter: planned for its value
-- every call (force_custom_plan). No JIT (docs/adr/0053). Admin only, as
-- backoff.schedules.
CREATE OR REPLACE FUNCTION backoff.schedule_list(p_name text DEFAULT NULL, p_now timestamptz DEFAULT now())
RETURNS TABLE (
    name              text,
    queue             text,
    payload           jsonb,
    cron              text,
    every             interval,
    anchor            timestamptz,
    time_zone         text,
    policy            text,
    priority          integer,
    max_attempts      integer,
    paused            boolean,
    catch_up          text,
    catch_up_window   interval,
    catch_up_limit    integer,
    skip_if_running   boolean,
    next_fire_at      timestamptz,
    last_slot         timestamptz,
    fired             bigint,
    skipped           bigint,
    missed            bigint,
    last_skipped_slot timestamptz,
    last_missed_at    timestamptz,
    created_at        timestamptz,
    updated_at        timestamptz,
    last_job_id       bigint,
    last_job_slot     timestamptz,
    overdue           boolean
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET plan_cache_mode = force_custom_plan
SET jit = off
AS $$
BEGIN
    p_now := backoff._now(p_now);
    RETURN QUERY
    SELECT s.name, s.queue, s.payload, s.cron, s.every, s.anchor, s.time_zone, s.policy, s.priority,
           s.max_attempts, s.paused, s.catch_up, s.catch_up_window, s.catch_up_limit, s.skip_if_running,
           s.next_fire_at, s.last_slot, s.fired, s.skipped, s.missed, s.last_skipped_slot, s.last_missed_at,
           s.created_at, s.updated_at, l.id, l.schedule_slot,
           NOT s.paused AND s.next_fire_at IS NOT NULL
           AND p_now > coalesce(backoff._next_fire(s, s.next_fire_at), s.next_fire_at)
    FROM backoff.schedules AS s
    LEFT JOIN LATERAL (SELECT j.id, j.schedule_slot FROM backoff.jobs AS j
                       WHERE j.schedule = s.name AND j.schedule_slot IS NOT NULL
                       ORDER BY j.schedule_slot DESC LIMIT 1) AS l ON true
    WHERE p_name IS NULL OR s.name = p_name
    ORDER BY s.name;
END
$$;

COMMENT ON FUNCTION backoff.schedule_list(text, timestamptz) IS
'Every stored schedule, or the one named p_name (NULL: all; no row for a name no schedule has in this database), by name: the settings put_schedule wrote (cron or every with its anchor, time_zone, the job''s queue, payload, policy, priority and max_attempts, the missed-slot policy) and the state fire_schedules keeps (paused, next_fire_at: NULL when the expression has no later time, last_slot, the counters fired, skipped (slots passed over by skip_if_running) and missed (slots passed over by catch_up ''latest'' or catch_up_window, see backoff.fire_schedules), last_skipped_slot, last_missed_at), then last_job_id and last_job_slot: the job of the latest slot fired (NULL: none yet, or pruned; a manual fire by backoff.trigger_schedule has no slot and is not counted here), and overdue: at p_now (default now) the schedule is not paused and its next fire time is past by more than its firing interval (the time from that slot to the one after it; past at all when there is none after it), i.e. nothing has called fire_schedules for its queue for a whole interval. Admin only.
Errors: 22023 for a p_now that is infinite or outside years 1-9999.
Example:
SELECT backoff.put_schedule(''nightly-report'', ''reports'', p_cron => ''30 2 * * *'', p_time_zone => ''Europe/Berlin'', p_now => ''2026-03-27 12:00+00'');
SELECT count(*) FROM backoff.fire_schedules(p_now => ''2026-03-28 02:00+00'');
SELECT name, queue, cron, next_fire_at, last_slot, fired, missed, last_job_slot, overdue FROM backoff.schedule_list(p_now => ''2026-03-28 02:00+00'');';
