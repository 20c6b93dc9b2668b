-- backoff._visible_queues(): the LIKE patterns of the queues whose jobs the
-- caller may read through the row-level security policy of backoff.jobs
-- (its 'work' scope), or NULL for every queue. SECURITY DEFINER because the
-- policy runs as the reading role, which may not read backoff.queue_grants;
-- private, executable by backoff_worker only
-- (docs/adr/0038-queue-scoped-privileges.md).
CREATE OR REPLACE FUNCTION backoff._visible_queues()
RETURNS text[]
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT backoff._queue_scope('work')
$$;
