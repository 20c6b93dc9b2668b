-- backoff._error_signature(error): the rule behind backoff.error_signature
-- (the masks are documented there), for the functions that compute it per
-- row: dead_letter_sample, dead_letter_groups, count_jobs and bulk_jobs.
-- Neither SECURITY DEFINER nor SET, so that PostgreSQL inlines it into the
-- calling statement (it names only pg_catalog's functions, so no
-- search_path can change what it calls). The public function, which must
-- be SECURITY DEFINER with its search_path pinned, is planned and run as
-- a function at every call: 10,000 of them took most of the dead letters
-- page's time at a million jobs.
CREATE OR REPLACE FUNCTION backoff._error_signature(p_error text)
RETURNS text
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
AS $$
    SELECT pg_catalog.regexp_replace(
             pg_catalog.regexp_replace(
               pg_catalog.regexp_replace(pg_catalog.left(coalesce(p_error, ''), 500),
                 '[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}', '<id>', 'g'),
               '\m(?=[a-fA-F]*[0-9])[0-9a-fA-F]{8,}\M', '<hex>', 'g'),
             '[0-9]+', 'N', 'g')
$$;
