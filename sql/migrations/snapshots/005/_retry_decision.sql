-- backoff._retry_decision(...): THE decision "retry at T, or dead-letter
-- with a reason" for a failed attempt. It exists once: fail (one row) and
-- reap (a batch of expired leases) both take it, so a reported failure and
-- a silent crash are judged identically
-- (docs/adr/0008-single-retry-decision.md). Pure: everything it needs is a
-- parameter, time included.
--
-- p_attempts is the counted attempt that failed, attempts -
-- uncounted_attempts (docs/adr/0020): claims given back by snooze or
-- before a replay do not count against max attempts nor grow the delay.
-- p_lease_expiries is how many times the job's lease expired, this expiry
-- included when reap asks (docs/adr/0046).
-- In order:
--   not p_retryable                          -> dead_lettered, 'non_retryable'
--   p_lease_expiries >= policy.max_lease_expiries
--                                            -> dead_lettered, 'lease_expiries'
--   p_attempts >= max attempts               -> dead_lettered, 'max_attempts'
--   next run after created_at + deadline     -> dead_lettered, 'deadline'
--   otherwise                                -> retrying at the next run
-- where max attempts = coalesce(p_max_attempts, policy.max_attempts) and the
-- next run = p_now + (p_retry_in clamped to policy.max_delay when given,
-- else the policy's delay for counted attempt p_attempts seeded by the job id).
-- p_capped_us is backoff._policy_capped_us(p_policy, p_attempts), the part
-- of that delay that does not depend on the job: the caller computes it
-- (reap once per distinct policy and counted attempt of its batch,
-- docs/adr/0052) and the decision adds the job's jitter
-- (backoff._policy_delay_us); it is an input, not a second decision.
-- A dead letter keeps its run_at and gets completed_at = p_now.
--
-- Shape (docs/adr/0041-set-based-reap-and-inlined-decision.md): one SQL
-- SELECT returning one row, so that PostgreSQL inlines it into the caller's
-- query as a subquery (a set-returning LANGUAGE sql function that is not
-- STRICT, VOLATILE or SECURITY DEFINER is inlined where it is used in FROM):
-- no function call, no PL/pgSQL per row. Callers pass the policy as a column
-- (a Var), not as a function call: an inlined function's argument is copied
-- into every place the body uses it. The next run is computed once (the
-- OFFSET 0 keeps its subquery from being flattened into both places that
-- read it), and the policy's delay only for a job that is retried.
CREATE OR REPLACE FUNCTION backoff._retry_decision(
    p_policy       backoff.policies,
    p_capped_us    float8,
    p_job_id       bigint,
    p_attempts     integer,
    p_max_attempts integer,
    p_lease_expiries integer,
    p_created_at   timestamptz,
    p_run_at       timestamptz,
    p_retry_in     interval,
    p_retryable    boolean,
    p_now          timestamptz
)
RETURNS TABLE (status text, run_at timestamptz, dead_letter_reason text, completed_at timestamptz)
LANGUAGE sql
STABLE PARALLEL SAFE
ROWS 1
AS $$
    SELECT CASE WHEN r.reason IS NULL THEN 'retrying' ELSE 'dead_lettered' END,
           CASE WHEN r.reason IS NULL THEN backoff._clamp_time(n.next_run) ELSE p_run_at END,
           r.reason,
           CASE WHEN r.reason IS NOT NULL THEN p_now END
    FROM (SELECT CASE
                     WHEN NOT p_retryable
                          OR p_lease_expiries >= (p_policy).max_lease_expiries
                          OR p_attempts >= coalesce(p_max_attempts, (p_policy).max_attempts) THEN NULL
                     WHEN p_retry_in IS NULL
                         THEN p_now + backoff._policy_delay_us(p_policy, p_attempts, p_job_id, p_capped_us) * interval '1 microsecond'
                     ELSE p_now + least(p_retry_in, (p_policy).max_delay)
                 END AS next_run
          OFFSET 0) AS n
    CROSS JOIN LATERAL (
        SELECT CASE
                   WHEN NOT p_retryable THEN 'non_retryable'
                   WHEN p_lease_expiries >= (p_policy).max_lease_expiries THEN 'lease_expiries'
                   WHEN p_attempts >= coalesce(p_max_attempts, (p_policy).max_attempts) THEN 'max_attempts'
                   WHEN (p_policy).deadline IS NOT NULL
                        AND n.next_run > p_created_at + (p_policy).deadline THEN 'deadline'
               END AS reason) AS r
$$;
