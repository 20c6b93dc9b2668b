-- backoff._governing_policy(policy, queue): the name of the policy that
-- governs a job, the one answer to that question
-- (docs/adr/0030-one-policy-answer.md): the job's recorded policy if it
-- names a row of backoff.policies, else its queue's (backoff.queues), else
-- 'default'. A name with no row (a policy deleted after the job was
-- enqueued) falls through to the next candidate, so a job is never stuck
-- for want of a policy.
--
-- Private. A one-row set-returning SQL function so that PostgreSQL inlines
-- it into the caller's query where it is used in FROM (as
-- backoff._retry_decision, docs/adr/0041): enqueue's INSERT then runs its
-- two primary-key look-ups as part of its own plan, once per statement for
-- one job and as a correlated subplan per row for a bulk enqueue, instead of
-- a PL/pgSQL call per job (profile in docs/benchmarks.md). A scalar SQL
-- function with sub-selects is never inlined, hence the table form.
--
-- backoff._job_policy_name(policy, queue) is the same answer as a scalar,
-- for the other callers (_job_policy, job_policy, pause_queue).
-- Both are called from SECURITY DEFINER functions with a pinned search_path.
CREATE OR REPLACE FUNCTION backoff._governing_policy(p_policy text, p_queue text)
RETURNS TABLE (name text)
LANGUAGE sql
STABLE PARALLEL SAFE
ROWS 1
AS $$
    SELECT coalesce(
        (SELECT p.name FROM backoff.policies AS p WHERE p.name = p_policy),
        (SELECT q.policy FROM backoff.queues AS q WHERE q.name = p_queue),
        'default')
$$;

CREATE OR REPLACE FUNCTION backoff._job_policy_name(p_policy text, p_queue text)
RETURNS text
LANGUAGE plpgsql
STABLE PARALLEL SAFE
AS $$
BEGIN
    -- PL/pgSQL, not SQL: a scalar SQL function with a FROM is never inlined,
    -- and an SQL function that is not inlined sets up its executor on every
    -- call (about 80 µs measured); PL/pgSQL plans the query once per session.
    RETURN (SELECT g.name FROM backoff._governing_policy(p_policy, p_queue) AS g);
END
$$;
