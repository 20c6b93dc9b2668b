-- backoff._job_filter(filters): the WHERE condition over backoff.jobs AS j
-- of the operator's job filters, for the statements that list_jobs and
-- count_jobs run with EXECUTE. Only the filters that are set appear, and
-- statuses are literals (six known names), so that each statement is
-- planned for its own filters and the planner can prove the predicates of
-- the partial indexes: dead letters and cancelled jobs (and a dead-letter
-- reason) read jobs_dead_idx or jobs_dead_letters_idx, finished jobs
-- jobs_finished_idx, running ones jobs_lease_idx. A single statement with
-- "p IS NULL OR ..." for every filter would be one plan for all of them,
-- and a cached generic plan loses those indexes. The values are not
-- written in: the condition names the statement's parameters $1 (queue),
-- $2 (effective policy), $3 (dead-letter reason), $4 and $5 (created_at
-- range), $6 and $7 (completed_at range) and $8 (the schedule that
-- enqueued the job), which the caller passes in that order with USING.
CREATE OR REPLACE FUNCTION backoff._job_filter(
    p_queue              text,
    p_statuses           text[],
    p_policy             text,
    p_dead_letter_reason text,
    p_created_from       timestamptz,
    p_created_to         timestamptz,
    p_finished_from      timestamptz,
    p_finished_to        timestamptz,
    p_schedule           text
)
RETURNS text
LANGUAGE plpgsql
IMMUTABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_where    text[] := ARRAY['true'];
    v_status   text;
    v_lits     text[] := '{}';
    v_finished boolean := true;
    v_running  boolean := true;
BEGIN
    IF p_queue IS NOT NULL THEN
        v_where := v_where || 'j.queue = $1'::text;
    END IF;
    IF p_statuses IS NOT NULL THEN
        FOREACH v_status IN ARRAY p_statuses LOOP
            IF v_status IS NULL OR v_status NOT IN ('pending', 'running', 'retrying', 'blocked', 'completed', 'dead_lettered', 'cancelled') THEN
                RAISE EXCEPTION 'unknown status "%"', coalesce(v_status, 'NULL')
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            v_lits := v_lits || pg_catalog.quote_literal(v_status);
            v_finished := v_finished AND v_status IN ('completed', 'dead_lettered', 'cancelled');
            v_running := v_running AND v_status = 'running';
        END LOOP;
        IF pg_catalog.cardinality(v_lits) = 0 THEN
            v_where := v_where || 'false'::text;
        ELSE
            v_where := v_where || ('j.status IN (' || pg_catalog.array_to_string(v_lits, ', ') || ')');
            IF v_finished THEN
                v_where := v_where || 'j.completed_at IS NOT NULL'::text;
            END IF;
            IF v_running THEN
                v_where := v_where || 'j.lease_until IS NOT NULL'::text;
            END IF;
        END IF;
    END IF;
    IF p_policy IS NOT NULL THEN
        v_where := v_where || 'backoff.job_policy(j.policy, j.queue) = $2'::text;
    END IF;
    IF p_dead_letter_reason IS NOT NULL THEN
        -- Only dead letters have a reason: say so, for the partial indexes.
        v_where := v_where || ARRAY['j.dead_letter_reason = $3', 'j.status = ''dead_lettered''', 'j.completed_at IS NOT NULL'];
    END IF;
    IF p_created_from IS NOT NULL THEN
        v_where := v_where || 'j.created_at >= $4'::text;
    END IF;
    IF p_created_to IS NOT NULL THEN
        v_where := v_where || 'j.created_at < $5'::text;
    END IF;
    IF p_finished_from IS NOT NULL THEN
        v_where := v_where || 'j.completed_at >= $6'::text;
    END IF;
    IF p_finished_to IS NOT NULL THEN
        v_where := v_where || 'j.completed_at < $7'::text;
    END IF;
    IF p_schedule IS NOT NULL THEN
        -- Implies schedule IS NOT NULL: the partial index of a schedule's
        -- slots (jobs_*_schedule_slot_idx) serves it.
        v_where := v_where || 'j.schedule = $8'::text;
    END IF;
    RETURN pg_catalog.array_to_string(v_where, ' AND ');
END
$$;
