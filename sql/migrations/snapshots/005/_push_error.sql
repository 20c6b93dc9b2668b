-- backoff._push_error(errors, attempt, counted, at, error, worker, kind,
-- started, role): the job's history with one entry appended, keeping the
-- 20 most recent entries (the oldest are dropped). Entries are objects
-- {"attempt", "counted", "at" (ISO 8601 UTC), "error", "worker", "kind"}
-- and, when known, "started" (ISO 8601 UTC) and "role":
-- attempt is the fencing token of the attempt (attempts, unique per claim),
-- counted its place in the budget (attempts - uncounted_attempts, what
-- max_attempts bounds: docs/adr/0020). kind 'error' (a handler's failure)
-- or 'lease_expired' (reaped) is a failed attempt, with started = when it
-- was claimed (last_attempted_at), so that a timeline can draw it; kind
-- 'replayed' or 'cancelled' is an operator's action (docs/adr/0066), with
-- role = the database role that asked; it is no attempt and nothing
-- counts it as one. Private; used by fail, reap, cancel and the replays.
-- One expression, so PostgreSQL inlines it into the UPDATE; the JSON path
-- runs only when there is something to drop (it costs about as much as the
-- rest of the entry).
CREATE OR REPLACE FUNCTION backoff._push_error(
    p_errors  jsonb,
    p_attempt integer,
    p_counted integer,
    p_at      timestamptz,
    p_error   text,
    p_worker  text,
    p_kind    text,
    p_started timestamptz DEFAULT NULL,
    p_role    text DEFAULT NULL
)
RETURNS jsonb
LANGUAGE sql
STABLE PARALLEL SAFE
AS $$
    SELECT CASE WHEN jsonb_array_length(p_errors) < 20 THEN p_errors
                ELSE jsonb_path_query_array(p_errors, '$[last - 18 to last]') END
        || jsonb_build_array(jsonb_build_object(
               'attempt', p_attempt,
               'counted', p_counted,
               'at', backoff._iso8601(p_at),
               'error', p_error,
               'worker', p_worker,
               'kind', p_kind)
           || CASE WHEN p_started IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('started', backoff._iso8601(p_started)) END
           || CASE WHEN p_role IS NULL THEN '{}'::jsonb
                   ELSE jsonb_build_object('role', p_role) END)
$$;
