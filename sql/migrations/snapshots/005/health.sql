-- backoff.health(max_age, now): one row that tells an operator whether
-- vacuum can keep up with the queue. Dead row versions of finished work are
-- removable only once no snapshot in the database can still see them: one
-- old snapshot (a session idle in a transaction, a long report, a prepared
-- transaction, a replication slot, a standby's hot_standby_feedback through
-- its walsender) keeps them all, and every claim then walks them. This
-- names the oldest such holder, how long it has held (for a slot, which has
-- no start time, its age in transactions), and the dead tuples and last
-- vacuum of the job tables, with a warning when the holder is older than
-- p_max_age or p_max_xid_age transactions (the only measure a slot has).
--
-- It reads pg_stat_activity, which shows another role's backend_xmin only
-- to members of pg_read_all_stats: SECURITY DEFINER as backoff_owner, which
-- migration 005 makes a member where the installer may grant it; without
-- it the warning says so instead of reporting a clean horizon it cannot
-- see. The query texts of other sessions are never returned.
-- It also says whether the maintenance runs and workers are there, as
-- backoff.liveness reads it (docs/adr/0079): a queue whose every worker
-- stopped otherwise looks like an idle one. Admin only.
CREATE OR REPLACE FUNCTION backoff.health(
    p_max_age     interval DEFAULT interval '5 minutes',
    p_max_xid_age integer DEFAULT 1000000,
    p_now         timestamptz DEFAULT NULL,
    p_max_quiet   interval DEFAULT interval '10 minutes'
)
RETURNS TABLE (
    holder_kind        text,
    holder_pid         integer,
    holder_name        text,
    holder_user        text,
    holder_state       text,
    holder_since       timestamptz,
    holder_age         interval,
    holder_xid_age     integer,
    jobs_live_tuples   bigint,
    jobs_dead_tuples   bigint,
    jobs_last_vacuum   timestamptz,
    jobs_bytes         bigint,
    warning            text,
    reap_at            timestamptz,
    rotate_at          timestamptz,
    switch_at          timestamptz,
    truncate_at        timestamptz,
    fire_at            timestamptz,
    active_schedules   bigint,
    workers_seen       bigint,
    liveness_warning   text,
    segments           integer,
    segments_waiting   integer,
    segments_waiting_bytes bigint,
    segments_held_by   text
)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_sees_all boolean := pg_catalog.pg_has_role('backoff_owner', 'pg_read_all_stats', 'USAGE');
BEGIN
    IF p_max_age IS NULL OR p_max_age < interval '0' THEN
        RAISE EXCEPTION 'health: max age must be 0 or more, got "%"', coalesce(p_max_age::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_xid_age IS NULL OR p_max_xid_age < 0 THEN
        RAISE EXCEPTION 'health: max transaction age must be 0 or more, got "%"', coalesce(p_max_xid_age::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_quiet IS NULL OR p_max_quiet < interval '0' THEN
        RAISE EXCEPTION 'health: max quiet must be 0 or more, got "%"', coalesce(p_max_quiet::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_now := backoff._now(p_now);
    SELECT l.reap_at, l.rotate_at, l.switch_at, l.truncate_at, l.fire_at, l.active_schedules, l.workers_seen, l.warning
    INTO reap_at, rotate_at, switch_at, truncate_at, fire_at, active_schedules, workers_seen, liveness_warning
    FROM backoff.liveness(p_max_quiet, p_now) AS l;

    -- The oldest holder of the xmin horizon of this database. Sessions of
    -- other databases do not hold back this database's tables; walsenders
    -- (no database) do, for hot_standby_feedback. A backend still starting
    -- (no database yet either) holds an xmin only while it reads the
    -- catalogs to log in: no snapshot anyone keeps.
    SELECT h.kind, h.pid, h.name, h.usr, h.state, h.since, h.xid_age
    INTO holder_kind, holder_pid, holder_name, holder_user, holder_state, holder_since, holder_xid_age
    FROM (
        SELECT 'session'::text AS kind, a.pid, a.application_name AS name, a.usename::text AS usr,
               a.state, a.xact_start AS since,
               pg_catalog.age(coalesce(a.backend_xmin, a.backend_xid)) AS xid_age
        FROM pg_catalog.pg_stat_activity AS a
        WHERE coalesce(a.backend_xmin, a.backend_xid) IS NOT NULL
          AND a.pid <> pg_catalog.pg_backend_pid()
          AND (a.datname = pg_catalog.current_database() OR a.backend_type = 'walsender')
        UNION ALL
        SELECT 'replication slot', s.active_pid, s.slot_name::text, NULL, CASE WHEN s.active THEN 'active' ELSE 'inactive' END,
               NULL, pg_catalog.age(s.xmin)
        FROM pg_catalog.pg_replication_slots AS s
        WHERE s.xmin IS NOT NULL
        UNION ALL
        SELECT 'prepared transaction', NULL, p.gid, p.owner::text, 'prepared', p.prepared,
               pg_catalog.age(p.transaction)
        FROM pg_catalog.pg_prepared_xacts AS p
        WHERE p.database = pg_catalog.current_database()
    ) AS h
    ORDER BY h.xid_age DESC, h.since
    LIMIT 1;
    holder_age := p_now - holder_since;

    SELECT sum(t.n_live_tup)::bigint, sum(t.n_dead_tup)::bigint,
           max(greatest(t.last_vacuum, t.last_autovacuum)),
           sum(pg_catalog.pg_total_relation_size(t.relid))::bigint
    INTO jobs_live_tuples, jobs_dead_tuples, jobs_last_vacuum, jobs_bytes
    FROM pg_catalog.pg_stat_user_tables AS t
    -- Its partitions (docs/adr/0061): the parent has no rows of its own.
    WHERE t.relid IN (SELECT p.relid FROM pg_catalog.pg_partition_tree('backoff.jobs'::pg_catalog.regclass) AS p
                      WHERE p.isleaf);

    -- The live segments (docs/adr/0082), and those not current that still
    -- take space: one just switched from waits for the next rotate; more
    -- wait for a transaction that read backoff.jobs, named here by the
    -- locks it holds on them.
    SELECT count(*)::integer,
           (count(*) FILTER (WHERE w.waits))::integer,
           coalesce(sum(pg_catalog.pg_total_relation_size(w.rel)) FILTER (WHERE w.waits), 0)::bigint
    INTO segments, segments_waiting, segments_waiting_bytes
    FROM (SELECT pg_catalog.format('backoff.jobs_live_%s', s.segment)::pg_catalog.regclass AS rel,
                 NOT s.current AND pg_catalog.pg_relation_size(pg_catalog.format('backoff.jobs_live_%s', s.segment)::pg_catalog.regclass) > 0 AS waits
          FROM backoff.segments AS s) AS w;
    SELECT pg_catalog.string_agg(DISTINCT pg_catalog.format('pid %s (%s)', l.pid,
                                     coalesce(pg_catalog.quote_literal(NULLIF(a.application_name, '')), 'no name')), ', ')
    INTO segments_held_by
    FROM pg_catalog.pg_locks AS l
    LEFT JOIN pg_catalog.pg_stat_activity AS a ON a.pid = l.pid
    WHERE l.locktype = 'relation' AND l.granted AND l.pid <> pg_catalog.pg_backend_pid()
      AND l.relation IN (SELECT pg_catalog.format('backoff.jobs_live_%s', s.segment)::pg_catalog.regclass::pg_catalog.oid
                         FROM backoff.segments AS s
                         WHERE NOT s.current
                           AND pg_catalog.pg_relation_size(pg_catalog.format('backoff.jobs_live_%s', s.segment)::pg_catalog.regclass) > 0);

    IF holder_age > p_max_age OR holder_xid_age > p_max_xid_age THEN
        warning := pg_catalog.format(
            'a %s (%s%s, user %s, %s) has held a snapshot%s, %s transactions behind: vacuum cannot remove the job versions that finished since (%s dead now), and every claim walks them',
            holder_kind, coalesce('pid ' || holder_pid || ', ', ''), coalesce(pg_catalog.quote_literal(holder_name), 'no name'),
            coalesce(holder_user, 'unknown'), holder_state,
            coalesce(' for ' || pg_catalog.to_char(holder_age, 'FMHH24"h"MI"m"SS"s"'), ''),
            holder_xid_age, coalesce(jobs_dead_tuples, 0));
    ELSIF NOT v_sees_all THEN
        warning := 'backoff_owner is not a member of pg_read_all_stats: sessions of other roles that hold back vacuum are not visible here (GRANT pg_read_all_stats TO backoff_owner)';
    END IF;
    IF segments_waiting > 1 AND segments_held_by IS NOT NULL THEN
        warning := pg_catalog.concat_ws('; ', warning, pg_catalog.format(
            '%s live segments (%s) wait to be truncated while %s holds them (a transaction that read backoff.jobs): claims are not slowed, and the space is given back when it ends',
            segments_waiting, pg_catalog.pg_size_pretty(segments_waiting_bytes), segments_held_by));
    END IF;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION backoff.health(interval, integer, timestamptz, interval) IS
'Whether vacuum keeps up with the queue, one row: the oldest holder of the database''s xmin horizon (holder_kind session, replication slot or prepared transaction; its pid, application or slot name or gid, user, state, since when and for how long, and its age in transactions), the live and dead tuples, last vacuum (manual or auto) and size with indexes of backoff.jobs, and a warning when live segments wait for a transaction that read backoff.jobs (below) or when the holder has held longer than p_max_age or is more than p_max_xid_age transactions old (a replication slot has no start time: only its age in transactions counts), or when backoff_owner cannot see other roles'' sessions. While a snapshot is held, vacuum can remove no job version that finished after it, and claims slow down as they walk them. No query text is returned. Then whether the maintenance runs and workers are there, as backoff.liveness(p_max_quiet, p_now) reads it: reap_at, rotate_at and fire_at (when reap, rotate and fire_schedules last ran, to within 15 s; NULL: never), switch_at (when the current segment became current), truncate_at (rotate''s last truncate), active_schedules, workers_seen (in the last minute) and liveness_warning, which names what has not run within p_max_quiet (default 10 minutes) and says when no worker was seen in the last minute (NULL when all is well). Then the live segments of backoff.jobs (docs/adr/0082): segments (3, more while rotate has added some), segments_waiting (those not current that still take space: one just switched from, until the next rotate; more while a transaction that read backoff.jobs holds them, which rotate cannot truncate), segments_waiting_bytes (their size with indexes, given back once they are truncated) and segments_held_by (the sessions holding a lock on them, as pid and application name; NULL: none). Admin only.
Errors: 22023 for a p_max_age, p_max_xid_age or p_max_quiet that is NULL or negative, or a p_now outside the accepted range.
Example:
SELECT warning FROM backoff.health(p_max_age => interval ''1 hour'', p_max_xid_age => 2000000000);
SELECT reap_at, rotate_at, workers_seen, liveness_warning FROM backoff.health(p_max_quiet => interval ''2 minutes'');';
