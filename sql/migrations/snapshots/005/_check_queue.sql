-- backoff._check_queue(queues, privilege): raise 42501
-- (insufficient_privilege) naming the first queue of p_queues the caller may
-- not act on with p_privilege (backoff._queue_scope; ADR 0038). Nothing
-- to check for an unscoped caller. Private; enqueue checks the queues it
-- inserts into ('produce'), claim its queue and the by-id functions the
-- queue of the job they touch ('work'). They call it as
--   IF backoff._scope_in_force() THEN PERFORM backoff._check_queue(...); END IF;
-- so that when nobody can be scoped the hot path pays that one check
-- (backoff._scope_in_force), not this function's look-ups.
CREATE OR REPLACE FUNCTION backoff._check_queue(p_queues text[], p_privilege text)
RETURNS void
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_scope text[] := backoff._queue_scope(p_privilege);
    v_queue text;
BEGIN
    IF v_scope IS NULL THEN
        RETURN;
    END IF;
    SELECT q INTO v_queue
    FROM pg_catalog.unnest(p_queues) AS q
    WHERE NOT q OPERATOR(pg_catalog.~~) ANY (v_scope)
    LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'permission denied: role "%" may not % queue "%"',
            coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user),
            CASE p_privilege WHEN 'produce' THEN 'produce into' ELSE 'work on' END, v_queue
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'backoff.grant_queue(role, queue, ''' || p_privilege || ''') allows it';
    END IF;
END
$$;
