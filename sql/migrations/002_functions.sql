-- Installs every public and private function of the backoff schema as
-- released with schema version 3 (round 1), frozen in snapshots/002 so this
-- migration never changes meaning (docs/adr/0003-migrations-and-function-versioning.md).
-- Later function changes are installed by migration 004.
{{ install_snapshot "002" }}

---- create above / drop below ----

DO $$
DECLARE
    v_fn regprocedure;
BEGIN
    FOR v_fn IN
        SELECT p.oid::regprocedure
        FROM pg_catalog.pg_proc p
        WHERE p.pronamespace = 'backoff'::regnamespace
    LOOP
        EXECUTE format('DROP FUNCTION %s CASCADE', v_fn);
    END LOOP;
END
$$;
