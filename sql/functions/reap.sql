-- backoff.reap(now, limit): move running jobs whose lease expired through
-- backoff._retry_decision, the same decision fail uses, as retryable
-- failures with message 'lease expired' and kind 'lease_expired'. Each
-- counts in the job's lease_expiries, which the policy's
-- max_lease_expiries bounds (docs/adr/0046); a lease expiry does not count
-- toward the queue's circuit breaker (docs/adr/0045). One
-- set-based UPDATE per batch (docs/adr/0041): each distinct (policy, queue)
-- of the batch is looked up once, its delay before jitter computed once
-- per distinct counted attempt (docs/adr/0052), and the decision is
-- inlined, so a row costs no PL/pgSQL call (only md5 for the jitter of a
-- retried job). The batch is locked with FOR UPDATE SKIP LOCKED, so any number of
-- reapers can run at once without waiting for one another or settling a job
-- twice. The outer UPDATE does not repeat the conditions: the rows are
-- locked by the batch, which rechecked them on their latest version, and a
-- repeated "lease_until < p_now" would let the planner walk the lease index
-- instead of probing the primary key.
CREATE OR REPLACE FUNCTION backoff.reap(
    p_now   timestamptz DEFAULT now(),
    p_limit integer DEFAULT 1000
)
RETURNS integer
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- One generic plan, as the other settling calls (docs/adr/0041): its shape
-- is the custom plan's (the ordered walk of the lease indexes), and a custom
-- plan was planned again at every call, about 3,500 instructions per job
-- reaped.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_count integer;
    v_dead  bigint[];
    -- A caller scoped by backoff.grant_queue reaps its 'work' queues only.
    v_scope text[] := backoff._queue_scope('work');
BEGIN
    p_now := backoff._now(p_now);
    IF p_limit IS NULL OR p_limit < 1 THEN
        RAISE EXCEPTION 'reap: limit must be at least 1, got "%"', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The batch is locked first (FOR UPDATE SKIP LOCKED returns each row as
    -- its latest version, which nobody can change until we commit), its
    -- distinct (policy, queue) pairs are resolved once each, and the
    -- decision, inlined, is taken per row from the locked values. The UPDATE
    -- then finds each row through the primary key (j.id = d.id; the batch is
    -- estimated small, so a nested loop of primary-key probes). It once also
    -- said "j.id = ANY (the batch's ids)": with the decision's join
    -- estimated at one row the planner put that array into the inner index
    -- scan, which sorted the whole array again for every row (quadratic: 5x
    -- the instructions per row at batches of 1,000; the plan test checks).
    WITH batch AS MATERIALIZED (
        SELECT r.id, r.queue, r.policy, r.attempts, r.uncounted_attempts, r.max_attempts, r.lease_expiries,
               r.created_at, r.run_at, r.segment
        FROM backoff.jobs AS r
        -- Only running jobs have a lease (every function keeps it so, ADR 0084).
        -- Adding "status = 'running'" would make the planner expect one row
        -- and prefer a bitmap scan plus a sort of every expired lease to
        -- this ordered walk of jobs_lease_idx that stops at p_limit.
        WHERE r.lease_until < p_now
          AND (v_scope IS NULL OR r.queue LIKE ANY (v_scope))
        ORDER BY r.lease_until
        LIMIT p_limit
        FOR UPDATE SKIP LOCKED
    ), batch_policy AS MATERIALIZED (
        SELECT k.queue, k.policy, backoff._job_policy(k.policy, k.queue) AS policy_row
        FROM (SELECT DISTINCT b.queue, b.policy FROM batch AS b) AS k
    ), batch_delay AS MATERIALIZED (
        -- The policy's capped delay before jitter depends on the policy and
        -- the counted attempt only: computed once per distinct pair here
        -- (docs/adr/0052), the job's jitter is added by the decision.
        SELECT k.queue, k.policy, k.counted, p.policy_row,
               backoff._policy_capped_us(p.policy_row, k.counted) AS capped_us
        FROM (SELECT DISTINCT b.queue, b.policy, b.attempts - b.uncounted_attempts AS counted FROM batch AS b) AS k
        JOIN batch_policy AS p ON p.queue = k.queue AND p.policy IS NOT DISTINCT FROM k.policy
    ), decided AS (
        SELECT b.id, b.segment, d.status, d.run_at, d.dead_letter_reason, d.completed_at
        FROM batch AS b
        JOIN batch_delay AS p ON p.queue = b.queue AND p.policy IS NOT DISTINCT FROM b.policy
                             AND p.counted = b.attempts - b.uncounted_attempts
        CROSS JOIN LATERAL backoff._retry_decision(
            p.policy_row, p.capped_us, b.id, p.counted, b.max_attempts, b.lease_expiries + 1,
            b.created_at, b.run_at, NULL, true, p_now) AS d
    ), settled AS (
        UPDATE backoff.jobs AS j
        SET status = d.status,
            run_at = d.run_at,
            dead_letter_reason = d.dead_letter_reason,
            completed_at = d.completed_at,
            lease_expiries = j.lease_expiries + 1,
            lease_until = NULL,
            locked_by = NULL,
            last_failed_at = p_now,
            last_error = 'lease expired',
            errors = backoff._push_error(j.errors, j.attempts, j.attempts - j.uncounted_attempts, p_now, 'lease expired', j.locked_by, 'lease_expired', j.last_attempted_at)
        FROM decided AS d
        -- The segment the batch locked the row in: each row's look-up then
        -- probes that segment's primary key only, the others pruned as the
        -- join runs (a row locked by the batch cannot move before commit).
        WHERE j.id = d.id
          AND j.segment = d.segment
        RETURNING j.id, j.status, j.segment
    )
    SELECT count(*), pg_catalog.array_agg(s.id) FILTER (WHERE s.status <> 'retrying' AND s.segment <> 0)
    INTO v_count, v_dead
    FROM settled AS s;
    -- Dead letters go to the finished partition (docs/adr/0061); the
    -- batch's rows are locked by this transaction, so none has moved.
    IF v_dead IS NOT NULL THEN
        PERFORM FROM backoff._move_finished(v_dead);
        -- Dead letters settle the jobs that depend on them (docs/adr/0087).
        IF EXISTS (SELECT FROM backoff.job_dependencies AS d WHERE d.parent_id = ANY (v_dead)) THEN
            PERFORM backoff._settle_dependents(v_dead, 'dead_lettered', p_now);
        END IF;
        IF EXISTS (SELECT FROM backoff.job_awaiters AS a WHERE a.job_id = ANY (v_dead)) THEN
            PERFORM backoff._notify_awaiters(v_dead);
        END IF;
    END IF;
    -- That a reap ran, for backoff.liveness (at most a write every 15 s).
    PERFORM backoff._note_maintenance('reap', NULL, p_now);
    RETURN v_count;
END
$$;

COMMENT ON FUNCTION backoff.reap(timestamptz, integer) IS
'Settle up to p_limit running jobs whose lease expired (lease_until < p_now) as failed attempts, through the same decision as fail (retryable, no requested delay), with lease_expiries + 1: retrying at the policy''s next delay, or dead_lettered (lease_expiries when the count reaches the policy''s max_lease_expiries, else max_attempts or deadline). Lease expiries do not count toward the queue''s circuit breaker. last_error = ''lease expired'', and the history entry has kind lease_expired, the expired attempt (its token) and counted attempt, the worker that held the lease, and started: when that attempt was claimed (last_attempted_at), so the stuck interval is [started, at]. Returns how many jobs it moved. Safe to run from many places at once: each batch is locked with FOR UPDATE SKIP LOCKED. Each call is recorded for backoff.liveness (reap_at; written at most once every 15 seconds). A caller scoped by backoff.grant_queue reaps only the queues it may work on.
Errors: 22023 for a limit < 1, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT backoff.enqueue(''emails'');
SELECT id FROM backoff.claim(''emails'', ''worker-1'', 1, ''30 seconds'');
SELECT backoff.reap(p_now => now() + interval ''1 minute'') AS reaped;';
