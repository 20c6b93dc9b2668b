-- backoff.schema_version(): the migration version installed in this
-- database, so clients can refuse to run against an older schema.
CREATE OR REPLACE FUNCTION backoff.schema_version()
RETURNS integer
LANGUAGE sql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT version FROM backoff.schema_migrations
$$;

COMMENT ON FUNCTION backoff.schema_version() IS
'The pgbackoff migration version installed in this database. Clients compare it with the version they need and ask for `backoffctl migrate up` when it is older.';
