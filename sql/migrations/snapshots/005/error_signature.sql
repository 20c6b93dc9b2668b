-- backoff.error_signature(error): an error text with what varies between
-- occurrences of one failure masked, so that dead letters group by cause:
-- UUIDs become <id>, hexadecimal runs of 8 or more characters <hex>, and
-- every run of digits N. The web UI's dead-letter groups and
-- backoff.bulk_jobs' p_error_signature filter both use it.
CREATE OR REPLACE FUNCTION backoff.error_signature(p_error text)
RETURNS text
LANGUAGE sql
IMMUTABLE
PARALLEL SAFE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
    SELECT backoff._error_signature(p_error)
$$;

COMMENT ON FUNCTION backoff.error_signature(text) IS
'The signature of an error text: its first 500 characters with UUIDs replaced by <id>, hexadecimal runs of 8 or more characters (with a digit) by <hex> and every run of digits by N, so that occurrences of one failure compare equal. NULL gives ''''. Immutable.
Example:
SELECT backoff.error_signature(''order 1234 failed: upstream 503''); -- order N failed: upstream N';
