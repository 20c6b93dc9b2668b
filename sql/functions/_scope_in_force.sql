-- backoff._scope_in_force(): whether any caller may be scoped by queue, i.e.
-- a grant exists (backoff.grant_queue) or backoff.settings says
-- require_queue_grants (a missing row counts as on). When false nobody is
-- scoped and the functions skip backoff._check_queue: they call it as
--   PERFORM backoff._check_queue(...) WHERE backoff._scope_in_force()
-- so that the hot path pays two probes of one-row or empty tables, not two
-- PL/pgSQL calls (docs/adr/0058-queue-scope-fails-closed.md). An SQL
-- function that PostgreSQL inlines. Private.
CREATE OR REPLACE FUNCTION backoff._scope_in_force()
RETURNS boolean
LANGUAGE sql
STABLE
AS $$
    SELECT EXISTS (SELECT FROM backoff.queue_grants)
           OR NOT EXISTS (SELECT FROM backoff.settings AS s WHERE NOT s.require_queue_grants)
$$;
