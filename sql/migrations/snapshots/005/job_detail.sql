-- backoff.job_detail(job id, payload chars): one job as an operator sees
-- it (backoffctl jobs show, the web UI's job page): the row, its error
-- history, and what governs it now (the policy backoff.job_policy names,
-- the attempts allowed). With p_payload_chars the payload comes as the
-- start of its text only, with its size, so that a payload of many
-- megabytes neither travels nor sits in a page's memory. One primary-key
-- probe, never worth compiling (no JIT, as for the other reads). Admin only: it shows any queue's payload (docs/adr/0072).
CREATE OR REPLACE FUNCTION backoff.job_detail(p_job_id bigint, p_payload_chars integer DEFAULT NULL)
RETURNS TABLE (
    id                     bigint,
    queue                  text,
    payload                jsonb,
    status                 text,
    priority               integer,
    attempts               integer,
    uncounted_attempts     integer,
    max_attempts           integer,
    policy                 text,
    run_at                 timestamptz,
    lease_until            timestamptz,
    locked_by              text,
    last_attempted_at      timestamptz,
    last_failed_at         timestamptz,
    last_error             text,
    errors                 jsonb,
    dead_letter_reason     text,
    dedupe_key             text,
    created_at             timestamptz,
    completed_at           timestamptz,
    schedule               text,
    schedule_slot          timestamptz,
    effective_policy       text,
    effective_max_attempts integer,
    payload_text           text,
    payload_bytes          bigint,
    payload_truncated      boolean,
    progress               jsonb,
    progress_at            timestamptz,
    parents                bigint[],
    parents_open           integer,
    parents_waiting        integer
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
BEGIN
    IF p_payload_chars < 1 THEN
        RAISE EXCEPTION 'show job %: payload preview of % characters: want at least 1', p_job_id, p_payload_chars
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
    SELECT j.id, j.queue, CASE WHEN p_payload_chars IS NULL THEN j.payload END, j.status, j.priority, j.attempts,
           j.uncounted_attempts, j.max_attempts, j.policy, j.run_at, j.lease_until, j.locked_by,
           j.last_attempted_at, j.last_failed_at, j.last_error, j.errors, j.dead_letter_reason, j.dedupe_key,
           j.created_at, j.completed_at, j.schedule, j.schedule_slot, gp.name, coalesce(j.max_attempts, p.max_attempts, 0),
           pg_catalog.left(pt.text, p_payload_chars), pg_catalog.octet_length(pt.text)::bigint,
           pg_catalog.length(pt.text) > p_payload_chars,
           g.progress, g.reported_at,
           ARRAY(SELECT e.parent_id FROM backoff.job_dependencies AS e WHERE e.child_id = j.id ORDER BY e.parent_id),
           b.remaining, b.waiting
    FROM backoff.jobs AS j
    -- Workflows (docs/adr/0087): the last progress reported, the jobs this
    -- one depends on, and while it is blocked how many are still open and
    -- how many failed and wait for an operator.
    LEFT JOIN backoff.job_progress AS g ON g.job_id = j.id
    LEFT JOIN backoff.job_blockers AS b ON b.job_id = j.id AND j.status = 'blocked'
    CROSS JOIN LATERAL (SELECT backoff.job_policy(j.policy, j.queue) AS name) AS gp
    LEFT JOIN backoff.policies AS p ON p.name = gp.name
    -- The payload's text only when a preview is asked for.
    CROSS JOIN LATERAL (SELECT CASE WHEN p_payload_chars IS NOT NULL THEN j.payload::text END AS text) AS pt
    WHERE j.id = p_job_id;
END
$$;

COMMENT ON FUNCTION backoff.job_detail(bigint, integer) IS
'Job p_job_id as an operator sees it: the columns of backoff.jobs (errors: the error history; schedule and schedule_slot: the schedule that enqueued it and its slot, NULL for a manual fire), effective_policy (backoff.job_policy) and effective_max_attempts (max_attempts, else the policy''s, else 0); no row for an unknown id. With p_payload_chars, payload is NULL and payload_text holds the first p_payload_chars characters of the payload''s JSON text (then no longer valid JSON when payload_truncated), payload_bytes the size of the whole text; without, payload is the whole payload and the three are NULL. progress and progress_at: the last progress a heartbeat reported (backoff.heartbeat''s p_progress) and when, NULL if none; parents: the ids of the jobs it depends on (empty if none); parents_open and parents_waiting, while it is blocked: how many parents have not finished yet, and how many failed under a ''wait'' edge and wait for backoff.unblock or a replay (NULL when not blocked). Admin only.
Errors: 22023 for a p_payload_chars below 1.
Example:
SELECT backoff.enqueue(''emails'', ''{"to": "a@example.com"}'');
SELECT id, status, effective_policy, payload_text, payload_bytes FROM backoff.job_detail(1, 200);';
