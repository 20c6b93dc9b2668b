-- backoff._scope_in_force(): whether the caller may be scoped by queue: it
-- does not act as a superuser (never scoped; the GUC is_superuser describes
-- the session's effective role even inside a definer function), and a grant
-- exists (backoff.grant_queue) or backoff.settings says
-- require_queue_grants (a missing row counts as on). When false the
-- functions skip backoff._check_queue: they call it as
--   PERFORM backoff._check_queue(...) WHERE backoff._scope_in_force()
-- so that the hot path pays a GUC read and two probes of one-row or empty
-- tables, not two PL/pgSQL calls (docs/adr/0058-queue-scope-fails-closed.md).
-- An SQL function that PostgreSQL inlines. Private.
CREATE OR REPLACE FUNCTION backoff._scope_in_force()
RETURNS boolean
LANGUAGE sql
STABLE
AS $$
    SELECT pg_catalog.current_setting('is_superuser') OPERATOR(pg_catalog.<>) 'on'
           AND (EXISTS (SELECT FROM backoff.queue_grants)
                OR NOT EXISTS (SELECT FROM backoff.settings AS s WHERE NOT s.require_queue_grants))
$$;
