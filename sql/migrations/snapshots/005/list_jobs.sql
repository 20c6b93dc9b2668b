-- backoff.list_jobs(filters, order, cursor, limit): one page of jobs for an
-- operator (backoffctl jobs list, the web UI's job pages, psql), with what
-- governs each job now (its effective policy and attempts allowed). Pages
-- are keyset pages: the cursor is the last job of the previous page (its
-- id, and its completed_at for the order 'finished'), never an OFFSET, so
-- a page costs the same wherever it is. The statement is written for the
-- filters that are set (backoff._job_filter) and run with EXECUTE, which
-- plans it with the values at every call: each filter keeps the partial
-- index it needs, as a cached generic plan would not. The order
-- 'finished' over every queue merges each queue's newest finished jobs (a
-- loose index scan over jobs_finished_idx) rather than sorting every
-- finished job. Text in the last error has no index: with p_error_contains
-- the page examines at most p_scan_limit jobs, and when that bound stopped
-- it short of p_limit matches a last row with scan_end true, the last job
-- it examined (which does not match), says where to continue from. A
-- schedule's page lists its jobs with p_schedule (the index of its slots
-- serves it). No JIT: many small index probes whose estimated cost passes
-- jit_above_cost (docs/adr/0053). Admin only: it shows every queue's jobs
-- and their payloads (docs/adr/0072).
CREATE OR REPLACE FUNCTION backoff.list_jobs(
    p_queue               text DEFAULT NULL,
    p_statuses            text[] DEFAULT NULL,
    p_policy              text DEFAULT NULL,
    p_dead_letter_reason  text DEFAULT NULL,
    p_error_contains      text DEFAULT NULL,
    p_created_from        timestamptz DEFAULT NULL,
    p_created_to          timestamptz DEFAULT NULL,
    p_finished_from       timestamptz DEFAULT NULL,
    p_finished_to         timestamptz DEFAULT NULL,
    p_schedule            text DEFAULT NULL,
    p_order               text DEFAULT 'oldest',
    p_after_id            bigint DEFAULT NULL,
    p_after_completed_at  timestamptz DEFAULT NULL,
    p_limit               integer DEFAULT 100,
    p_payloads            boolean DEFAULT true,
    p_scan_limit          integer DEFAULT 5000
)
RETURNS TABLE (
    id                     bigint,
    queue                  text,
    payload                jsonb,
    status                 text,
    priority               integer,
    attempts               integer,
    uncounted_attempts     integer,
    max_attempts           integer,
    policy                 text,
    run_at                 timestamptz,
    lease_until            timestamptz,
    locked_by              text,
    last_attempted_at      timestamptz,
    last_failed_at         timestamptz,
    last_error             text,
    errors                 jsonb,
    dead_letter_reason     text,
    dedupe_key             text,
    created_at             timestamptz,
    completed_at           timestamptz,
    schedule               text,
    schedule_slot          timestamptz,
    effective_policy       text,
    effective_max_attempts integer,
    scan_end               boolean
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_order   text[];
    v_cond    text;
    v_bound   integer := p_limit;
    v_source  text;
    v_with    text := '';
    v_from    text;
    v_n       bigint;
    v_last_id bigint;
    v_seen    bigint;
BEGIN
    -- Each order's ORDER BY, its reverse, and its cursor condition ($9:
    -- the cursor's id, $10: its completion time; $1 to $8 are the
    -- filters of backoff._job_filter).
    v_order := CASE p_order
        WHEN 'oldest' THEN ARRAY['j.id', 'j.id DESC', 'j.id > $9']
        WHEN 'newest' THEN ARRAY['j.id DESC', 'j.id', 'j.id < $9']
        WHEN 'finished' THEN ARRAY['j.completed_at DESC, j.id DESC', 'j.completed_at, j.id', '(j.completed_at, j.id) < ($10, $9)']
    END;
    IF v_order IS NULL THEN
        RAISE EXCEPTION 'list jobs: order must be oldest, newest or finished, got "%"', coalesce(p_order, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'list jobs: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_scan_limit IS NULL OR p_scan_limit < 1 THEN
        RAISE EXCEPTION 'list jobs: scan limit must be at least 1, got "%"', coalesce(p_scan_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_order = 'finished' AND (p_after_id IS NULL) <> (p_after_completed_at IS NULL) THEN
        RAISE EXCEPTION 'list jobs: the order finished continues after an id and a completion time, got "%" and "%"',
            coalesce(p_after_id::text, 'NULL'), coalesce(p_after_completed_at::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_cond := backoff._job_filter(p_queue, p_statuses, p_policy, p_dead_letter_reason,
                                  p_created_from, p_created_to, p_finished_from, p_finished_to, p_schedule);
    IF p_order = 'finished' THEN
        v_cond := v_cond || ' AND j.completed_at IS NOT NULL';
    END IF;
    IF p_after_id IS NOT NULL THEN
        v_cond := v_cond || ' AND ' || v_order[3];
    END IF;
    IF p_error_contains IS NOT NULL THEN
        v_bound := p_scan_limit;
    END IF;
    -- $11: the bound of the jobs the filters select.
    v_source := 'SELECT j.* FROM backoff.jobs AS j WHERE ' || v_cond || ' ORDER BY ' || v_order[1] || ' LIMIT $11';
    IF p_order = 'finished' AND p_queue IS NULL THEN
        v_with := 'WITH RECURSIVE qs (name) AS (
    (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL ORDER BY j.queue LIMIT 1)
    UNION ALL
    SELECT (SELECT j.queue FROM backoff.jobs AS j WHERE j.completed_at IS NOT NULL AND j.queue > qs.name
            ORDER BY j.queue LIMIT 1)
    FROM qs WHERE qs.name IS NOT NULL
) ';
        v_source := 'SELECT m.* FROM qs CROSS JOIN LATERAL (SELECT j.* FROM backoff.jobs AS j WHERE j.queue = qs.name AND '
            || v_cond || ' ORDER BY ' || v_order[1] || ' LIMIT $11) AS m WHERE qs.name IS NOT NULL ORDER BY '
            || pg_catalog.replace(v_order[1], 'j.', 'm.') || ' LIMIT $11';
    END IF;
    -- A value that is not selected is never detoasted nor sent: without
    -- payloads the rows weigh a few hundred bytes whatever the payloads.
    -- %1$s: the jobs, %2$s: scan_end.
    v_from := 'SELECT j.id, j.queue, '
        || CASE WHEN p_payloads THEN 'j.payload' ELSE 'NULL::jsonb' END
        || ', j.status, j.priority, j.attempts, j.uncounted_attempts, j.max_attempts, j.policy, j.run_at, '
        || 'j.lease_until, j.locked_by, j.last_attempted_at, j.last_failed_at, j.last_error, '
        || CASE WHEN p_payloads THEN 'j.errors' ELSE 'NULL::jsonb' END
        || ', j.dead_letter_reason, j.dedupe_key, j.created_at, j.completed_at, j.schedule, j.schedule_slot, '
        || 'gp.name, coalesce(j.max_attempts, p.max_attempts, 0), %2$s '
        || 'FROM (%1$s) AS j '
        || 'CROSS JOIN LATERAL (SELECT backoff.job_policy(j.policy, j.queue) AS name) AS gp '
        || 'LEFT JOIN backoff.policies AS p ON p.name = gp.name ';
    IF p_error_contains IS NULL THEN
        RETURN QUERY EXECUTE v_with || pg_catalog.format(v_from, v_source, 'false') || 'ORDER BY ' || v_order[1]
            USING p_queue, p_policy, p_dead_letter_reason, p_created_from, p_created_to,
                  p_finished_from, p_finished_to, p_schedule, p_after_id, p_after_completed_at, v_bound;
        RETURN;
    END IF;
    -- $12: the text, $13: the page's limit.
    RETURN QUERY EXECUTE v_with || pg_catalog.format(v_from, v_source, 'false')
        || 'WHERE pg_catalog.strpos(pg_catalog.lower(j.last_error), pg_catalog.lower($12)) > 0 ORDER BY '
        || v_order[1] || ' LIMIT $13'
        USING p_queue, p_policy, p_dead_letter_reason, p_created_from, p_created_to,
              p_finished_from, p_finished_to, p_schedule, p_after_id, p_after_completed_at, v_bound, p_error_contains, p_limit;
    GET DIAGNOSTICS v_n = ROW_COUNT;
    IF v_n >= p_limit THEN
        RETURN;
    END IF;
    -- Fewer matches than the page: did the search stop at its bound? Then
    -- the last job it examined follows, marked, as the cursor to go on.
    EXECUTE v_with || 'SELECT j.id, count(*) OVER () FROM (' || v_source || ') AS j ORDER BY '
        || v_order[2] || ' LIMIT 1'
        INTO v_last_id, v_seen
        USING p_queue, p_policy, p_dead_letter_reason, p_created_from, p_created_to,
              p_finished_from, p_finished_to, p_schedule, p_after_id, p_after_completed_at, v_bound;
    IF v_seen >= p_scan_limit THEN
        RETURN QUERY EXECUTE pg_catalog.format(v_from, 'SELECT j.* FROM backoff.jobs AS j WHERE j.id = $1', 'true')
            USING v_last_id;
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.list_jobs(text, text[], text, text, text, timestamptz, timestamptz, timestamptz, timestamptz, text, text, bigint, timestamptz, integer, boolean, integer) IS
'One page of jobs, at most p_limit (default 100), for an operator: the columns of backoff.jobs (schedule and schedule_slot: the schedule that enqueued the job and its slot, NULL for a manual fire by backoff.trigger_schedule), effective_policy (backoff.job_policy) and effective_max_attempts (max_attempts, else the policy''s, else 0). NULL filters do not filter: p_queue; p_statuses (an empty array matches nothing); p_policy, the effective policy; p_dead_letter_reason; p_error_contains, case-insensitive text in last_error; created_at in [p_created_from, p_created_to); completed_at in [p_finished_from, p_finished_to); p_schedule, the schedule that enqueued the job (its slots and manual fires; a schedule''s page lists them with p_order ''newest''). p_order: ''oldest'' (id ascending, the default), ''newest'' (id descending) or ''finished'' (finished jobs only, completed_at descending then id). Keyset pages: the next page passes the last row''s id as p_after_id (and its completed_at as p_after_completed_at for ''finished''); ask for one row more than shown to learn whether there is a next page. p_payloads false returns payload and errors NULL (light rows for a listing). p_error_contains has no index: the page examines at most p_scan_limit (default 5000) jobs, and when it stopped there with fewer than p_limit matches a last row with scan_end true is the last job examined, which does not match: the cursor to continue the search from. Every other row has scan_end false. An index serves each other filter, so a page reads about as many rows as it returns. Admin only.
Errors: 22023 for an unknown order or status, a p_limit or p_scan_limit below 1, or the order finished with only one of p_after_id and p_after_completed_at.
Example:
SELECT backoff.enqueue(''emails'', ''{"to": "a@example.com"}'');
SELECT backoff.put_schedule(''hourly-sync'', ''sync'', p_every => ''1 hour'', p_now => ''2026-01-01 00:00+00'');
SELECT count(*) FROM backoff.fire_schedules(p_now => ''2026-01-01 01:00+00'');
SELECT count(*) FROM backoff.trigger_schedule(''hourly-sync'', p_now => ''2026-01-01 01:30+00'');
SELECT id, queue, status, schedule_slot, effective_policy FROM backoff.list_jobs(p_statuses => ''{pending}'', p_schedule => ''hourly-sync'', p_order => ''newest'', p_limit => 20);';
