-- backoff._iso8601(at): a timestamptz as ISO 8601 in UTC with microseconds
-- ("2026-01-02T03:04:05.000006Z"), whatever the session's TimeZone. Private;
-- used for the error history and for BK004's DETAIL, which clients parse.
CREATE OR REPLACE FUNCTION backoff._iso8601(p_at timestamptz)
RETURNS text
LANGUAGE sql
STABLE PARALLEL SAFE
AS $$
    SELECT to_char(p_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;
