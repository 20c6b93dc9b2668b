-- backoff._work_scope(): the queues the caller may work on, as LIKE
-- patterns, or NULL when no queue scope is in force (backoff._scope_in_force
-- is false: a superuser, or no grant exists and require_queue_grants is
-- off). The functions that read or settle jobs filter with
--   (v_scope IS NULL OR queue OPERATOR(pg_catalog.~~) ANY (v_scope))
-- and call this once per call, so that the rule "scoped only when a scope
-- is in force" is written here and nowhere else
-- (docs/adr/0058-queue-scope-fails-closed.md). Private.
--
-- PL/pgSQL like backoff._scope_in_force, for the same reason: cached plans,
-- no SQL-function executor per call.
CREATE OR REPLACE FUNCTION backoff._work_scope()
RETURNS text[]
LANGUAGE plpgsql
STABLE
AS $$
BEGIN
    IF backoff._scope_in_force() THEN
        RETURN backoff._queue_scope('work');
    END IF;
    RETURN NULL;
END
$$;
