-- Installs every public and private function of the backoff schema as
-- released with schema version 3, frozen in snapshots/002 so this
-- migration never changes meaning (docs/adr/0003-migrations-and-function-versioning.md).
-- Later function changes are installed by migration 004.
{{ install_snapshot "002" }}

---- create above / drop below ----

-- Every name qualified (an unqualified format() here once ran a
-- look-alike planted in public as the migrating user); the migrator also
-- pins search_path = pg_catalog.
DO $$
DECLARE
    v_fn pg_catalog.regprocedure;
BEGIN
    FOR v_fn IN
        SELECT p.oid::pg_catalog.regprocedure
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'backoff'::pg_catalog.regnamespace
    LOOP
        EXECUTE pg_catalog.format('DROP FUNCTION %s CASCADE', v_fn);
    END LOOP;
END
$$;
