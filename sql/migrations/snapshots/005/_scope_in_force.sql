-- backoff._scope_in_force(): whether the caller may be scoped by queue: it
-- does not act as a superuser (never scoped; the GUC is_superuser describes
-- the session's effective role even inside a definer function), and a grant
-- exists (backoff.grant_queue) or backoff.settings says
-- require_queue_grants (a missing row counts as on). When false the
-- functions skip backoff._check_queue: they call it as
--   IF backoff._scope_in_force() THEN PERFORM backoff._check_queue(...); END IF;
-- (docs/adr/0058-queue-scope-fails-closed.md), an expression PL/pgSQL
-- evaluates without starting an executor, where PERFORM ... WHERE started
-- one for every call (about 10,000 instructions). Private.
--
-- PL/pgSQL, not SQL: an SQL function whose body holds sub-selects is never
-- inlined, so every call ran the SQL-function executor (31 µs a call in the
-- RETURNING of enqueue's INSERT, half of enqueue's time); here a superuser
-- costs one GUC read, anyone else two probes of one-row or empty tables
-- through cached plans.
CREATE OR REPLACE FUNCTION backoff._scope_in_force()
RETURNS boolean
LANGUAGE plpgsql
STABLE
AS $$
BEGIN
    IF pg_catalog.current_setting('is_superuser') = 'on' THEN
        RETURN false;
    END IF;
    RETURN EXISTS (SELECT FROM backoff.queue_grants)
        OR NOT EXISTS (SELECT FROM backoff.settings AS s WHERE NOT s.require_queue_grants);
END
$$;
