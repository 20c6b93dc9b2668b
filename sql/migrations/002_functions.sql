-- Installs every public and private function of the backoff schema.
-- "unreleased" is the working copy in sql/functions; when a version is
-- released its functions are frozen into snapshots/NNN and this line names
-- that snapshot instead (docs/adr/0003-migrations-and-function-versioning.md).
{{ install_snapshot "unreleased" }}

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
