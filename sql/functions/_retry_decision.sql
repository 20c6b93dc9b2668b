-- backoff._retry_decision(...): THE decision "retry at T, or dead-letter
-- with a reason" for a failed attempt. It exists once: fail (one row) and
-- reap (a batch of expired leases) both call it inside their UPDATE, so a
-- reported failure and a silent crash are judged identically
-- (docs/adr/0008-single-retry-decision.md). Pure: everything it needs is a
-- parameter, time included.
--
-- p_attempts is the counted attempt that failed, attempts -
-- uncounted_attempts (docs/adr/0020): claims given back by snooze or
-- before a replay do not count against max attempts nor grow the delay.
-- In order:
--   not p_retryable                          -> dead_lettered, 'non_retryable'
--   p_attempts >= max attempts               -> dead_lettered, 'max_attempts'
--   next run after created_at + deadline     -> dead_lettered, 'deadline'
--   otherwise                                -> retrying at the next run
-- where max attempts = coalesce(p_max_attempts, policy.max_attempts) and the
-- next run = p_now + (p_retry_in clamped to policy.max_delay when given,
-- else the policy's delay for counted attempt p_attempts seeded by the job id).
-- A dead letter keeps its run_at and gets completed_at = p_now.
CREATE OR REPLACE FUNCTION backoff._retry_decision(
    p_policy       backoff.policies,
    p_job_id       bigint,
    p_attempts     integer,
    p_max_attempts integer,
    p_created_at   timestamptz,
    p_run_at       timestamptz,
    p_retry_in     interval,
    p_retryable    boolean,
    p_now          timestamptz,
    OUT status             text,
    OUT run_at             timestamptz,
    OUT dead_letter_reason text,
    OUT completed_at       timestamptz
)
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_next timestamptz;
BEGIN
    IF NOT p_retryable THEN
        dead_letter_reason := 'non_retryable';
    ELSIF p_attempts >= coalesce(p_max_attempts, (p_policy).max_attempts) THEN
        dead_letter_reason := 'max_attempts';
    ELSE
        IF p_retry_in IS NULL THEN
            v_next := p_now + backoff._policy_delay_us(p_policy, p_attempts, p_job_id) * interval '1 microsecond';
        ELSE
            v_next := p_now + least(p_retry_in, (p_policy).max_delay);
        END IF;
        IF (p_policy).deadline IS NOT NULL AND v_next > p_created_at + (p_policy).deadline THEN
            dead_letter_reason := 'deadline';
        ELSE
            status := 'retrying';
            run_at := v_next;
            RETURN;
        END IF;
    END IF;
    status := 'dead_lettered';
    run_at := p_run_at;
    completed_at := p_now;
END
$$;
