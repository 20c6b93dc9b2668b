-- backoff.liveness(max_quiet, now): whether the queue's maintenance runs
-- and workers are there, one row (docs/adr/0079). Reap settles stranded
-- leases, rotate keeps the live segments small, fire_schedules fires the
-- schedules: nothing else does, and a queue whose every worker stopped
-- looks like an idle one. The times come from backoff.maintenance, written
-- by those calls at most once every 15 seconds (so they are up to 15 s
-- old), and the current segment's switched_at; the workers seen are those
-- that named themselves to rotate (every Worker does, beside each reap,
-- busy or idle) and those that claimed a job still running, in the minute
-- up to p_now: read from the small table and the lease index, nothing is
-- written for it. The warning says what stopped, in words. Admin only.
CREATE OR REPLACE FUNCTION backoff.liveness(
    p_max_quiet interval DEFAULT interval '10 minutes',
    p_now       timestamptz DEFAULT NULL
)
RETURNS TABLE (
    reap_at          timestamptz,
    rotate_at        timestamptz,
    switch_at        timestamptz,
    truncate_at      timestamptz,
    fire_at          timestamptz,
    active_schedules bigint,
    workers_seen     bigint,
    warning          text
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_stale   text[] := '{}';
    v_effects text[] := '{}';
    v_all     boolean := true;
    v_latest  timestamptz;
    v_parts   text[] := '{}';
BEGIN
    IF p_max_quiet IS NULL OR p_max_quiet < interval '0' THEN
        RAISE EXCEPTION 'liveness: max quiet must be 0 or more, got "%"', coalesce(p_max_quiet::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);

    SELECT max(m.ran_at) FILTER (WHERE m.task = 'reap'), max(m.ran_at) FILTER (WHERE m.task = 'rotate'),
           max(m.ran_at) FILTER (WHERE m.task = 'truncate'), max(m.ran_at) FILTER (WHERE m.task = 'fire_schedules')
    INTO reap_at, rotate_at, truncate_at, fire_at
    FROM backoff.maintenance AS m;
    switch_at := (SELECT s.switched_at FROM backoff.segments AS s WHERE s.current);
    active_schedules := (SELECT count(*) FROM backoff.schedules AS s WHERE NOT s.paused);
    SELECT count(*) INTO workers_seen
    FROM (SELECT w.worker FROM backoff.maintenance_workers AS w
          WHERE w.seen_at > p_now - interval '1 minute'
          UNION
          -- Only running jobs have a lease: jobs_lease_idx.
          SELECT j.locked_by FROM backoff.jobs AS j
          WHERE j.lease_until IS NOT NULL AND j.locked_by IS NOT NULL
            AND j.last_attempted_at > p_now - interval '1 minute') AS seen;

    -- What has not run within p_max_quiet, in words.
    IF reap_at IS NULL OR p_now - reap_at > p_max_quiet THEN
        v_stale := v_stale || coalesce('reap last ran ' || backoff._span_text(p_now - reap_at) || ' ago', 'reap never ran');
        v_effects := v_effects || 'expired leases stay stranded'::text;
    ELSE
        v_all := false;
    END IF;
    IF rotate_at IS NULL OR p_now - rotate_at > p_max_quiet THEN
        v_stale := v_stale || coalesce('rotate last ran ' || backoff._span_text(p_now - rotate_at) || ' ago', 'rotate never ran');
        v_effects := v_effects || 'the live segments are not rotated'::text;
    ELSE
        v_all := false;
    END IF;
    IF active_schedules > 0 AND (fire_at IS NULL OR p_now - fire_at > p_max_quiet) THEN
        v_stale := v_stale || coalesce('schedules last fired ' || backoff._span_text(p_now - fire_at) || ' ago',
                                       'schedules never fired');
        v_effects := v_effects || CASE WHEN active_schedules = 1 THEN 'the active schedule fires nothing'
                                       ELSE pg_catalog.format('%s active schedules fire nothing', active_schedules) END;
    ELSIF active_schedules > 0 THEN
        v_all := false;
    END IF;
    IF cardinality(v_stale) > 0 THEN
        v_latest := (SELECT max(t) FROM unnest(ARRAY[reap_at, rotate_at,
                                                     CASE WHEN active_schedules > 0 THEN fire_at END]) AS t);
        v_parts := v_parts || pg_catalog.format('%s: %s (%s)',
            CASE
                WHEN NOT v_all THEN 'part of the maintenance stopped'
                WHEN v_latest IS NULL THEN 'no maintenance has ever run'
                ELSE 'no maintenance ran for ' || backoff._span_text(p_now - v_latest)
            END,
            pg_catalog.array_to_string(v_stale, ', '), pg_catalog.array_to_string(v_effects, ', '));
    END IF;
    IF workers_seen = 0 THEN
        v_parts := v_parts || 'no worker was seen in the last minute'::text;
    END IF;
    warning := nullif(pg_catalog.array_to_string(v_parts, '; '), '');
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION backoff.liveness(interval, timestamptz) IS
'Whether the maintenance runs and workers are there, one row (docs/adr/0079): reap_at, rotate_at and fire_at = when backoff.reap, backoff.rotate and backoff.fire_schedules last ran (recorded at most once every 15 seconds, so up to 15 s old; NULL: never), switch_at = when the current segment became current (rotate''s last switch, or the install), truncate_at = when rotate last truncated a segment (NULL: never), active_schedules = schedules not paused, workers_seen = the workers seen in the minute up to p_now: those that named themselves to backoff.rotate (p_worker; the Go, Python and TypeScript Workers do at every reap interval, busy or idle) and those that claimed a job that is still running. warning (NULL when all is well) says, in words, which of reap, rotate and (with active schedules) fire_schedules has not run within p_max_quiet (default 10 minutes) and what that leaves undone, and that no worker was seen in the last minute. Nothing is written by it, and claim and complete write nothing for it. Admin only.
Errors: 22023 for a p_max_quiet that is NULL or negative, or a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.reap(p_now => ''2030-01-01 00:00+00'');
SELECT moved FROM backoff.rotate(p_now => ''2030-01-01 00:00+00'', p_worker => ''worker-1'');
SELECT reap_at, rotate_at, workers_seen, warning FROM backoff.liveness(p_now => ''2030-01-01 00:00:30+00'');
SELECT warning FROM backoff.liveness(p_now => ''2030-01-01 00:20+00'');';
