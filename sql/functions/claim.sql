-- backoff.claim(queue, worker, limit, lease, now): claim up to p_limit due
-- jobs of a queue in one UPDATE. The candidates are locked with
-- FOR UPDATE SKIP LOCKED, so concurrent claimers never wait for, nor share,
-- a row. Hot path: one statement, no extra queries.
--
-- Plan notes (docs/design.md#plans): the candidates are collected into an
-- array (an InitPlan) and the UPDATE finds them with id = ANY(array) on the
-- primary key. The usual id IN (SELECT ... LIMIT p_limit FOR UPDATE SKIP
-- LOCKED) can get a generic plan that hash-joins a sequential scan of the
-- whole table. The lease comes from the job's recorded policy, one
-- primary-key look-up, so that a claimed row costs no PL/pgSQL call (profile
-- in docs/adr/0041); backoff._job_policy, the governing policy's answer, is
-- only reached when that row is gone (a policy deleted after the job was
-- enqueued: its queue's, else 'default', else 22023). A paused queue
-- (backoff.queues.paused) gives nothing.
--
-- Queue controls (docs/adr/0045): the fast statement's probe of
-- backoff.queues also gives nothing for a queue with a rate or with a
-- breaker that is not closed (the breaker's state row is only read for a
-- queue row with breaker_failures set; a closed breaker does not hold
-- claims back, so it takes the fast statement too). Only when the fast
-- statement claimed nothing does claim look at the queue's row again and,
-- for such a queue that is not paused, take backoff._claim_controlled. A
-- queue without controls pays nothing more while it has due jobs; the
-- probe is a one-time filter, so a held queue's fast statement reads no
-- job. While no queue has a control, backoff._queues_held() is false and
-- the probe, and the second look, are planned away (docs/adr/0094).
--
-- The candidates come from the current live segment only (docs/adr/0061),
-- the others pruned when the statement is planned (backoff._current_segment
-- is a constant): a segment switched from keeps, until backoff.rotate
-- truncates it, the index entries of every job it held, which no vacuum
-- removes while an old snapshot is open, and a claim that read them would
-- walk them all. A job left in another segment (an enqueue that raced the
-- switch, a row locked while rotate moved the others) is claimable once the
-- next rotate has moved it.
CREATE OR REPLACE FUNCTION backoff.claim(
    p_queue  text,
    p_worker text,
    p_limit  integer DEFAULT 1,
    p_lease  interval DEFAULT NULL,
    p_now    timestamptz DEFAULT now()
)
RETURNS SETOF backoff.jobs
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Index plans even when the plan is made while backoff.jobs is tiny: a
-- cached plan outlives the table's growth. JIT off: a table without a usable
-- index then costs disable_cost, which would compile it (docs/adr/0053).
SET enable_seqscan = off
SET jit = off
-- Generic plans only (docs/adr/0041): with a lease given, a custom plan folds
-- coalesce(lease, policy look-up) away, looks cheaper than the generic one,
-- and the plan cache would then plan the statement again on every call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_controls backoff.queues;
BEGIN
    -- Every input in one expression, which a call evaluates once; the
    -- error path says what is wrong (the names through _check_name).
    IF NOT backoff._name_ok(p_queue) OR NOT backoff._name_ok(p_worker) OR p_limit IS NULL OR p_limit < 1
       OR p_lease <= interval '0' OR NOT backoff._valid_span(p_lease) THEN
        p_queue := backoff._check_name('queue', p_queue);
        p_worker := backoff._check_name('worker', p_worker);
        IF p_limit IS NULL OR p_limit < 1 THEN
            RAISE EXCEPTION 'claim in queue "%": limit must be at least 1, got "%"', p_queue, coalesce(p_limit::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        ELSE
            RAISE EXCEPTION 'claim in queue "%": lease must be positive and at most 876600 hours, got "%"', p_queue, p_lease
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    p_now := backoff._now(p_now);
    -- A queue moving away from this shard gives nothing here
    -- (docs/adr/0092): its waiting jobs go to the new shard. The marks are
    -- read only on a shard that has one (backoff._moves_out).
    IF backoff._moves_out() THEN
        IF EXISTS (SELECT FROM backoff.queue_moves AS m WHERE m.queue = p_queue AND m.direction = 'out') THEN
            RETURN;
        END IF;
    END IF;

    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_queue(ARRAY[p_queue], 'work');
    END IF;
    -- The same statement twice, with LIMIT 1 and with LIMIT p_limit. A
    -- parameter in LIMIT makes the generic plan look expensive (the planner
    -- assumes it keeps 10% of the rows), so the plan cache would plan the
    -- statement again on every call; with a constant it keeps one generic
    -- plan, which matters for one job per call. A batch amortizes planning.
    IF p_limit = 1 THEN
        RETURN QUERY
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            lease_until = backoff._clamp_time(p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease)),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.segment = backoff._current_segment()
          AND j.id = ANY (ARRAY(
            SELECT c.id
            FROM backoff.jobs AS c
            WHERE c.segment = backoff._current_segment()
              AND c.queue = p_queue
              AND c.status IN ('pending', 'retrying')
              AND c.run_at <= p_now
              AND NOT (backoff._queues_held()
                       AND EXISTS (SELECT FROM backoff.queues AS q
                                   WHERE q.name = p_queue
                                     AND (q.paused OR q.rate IS NOT NULL
                                             OR (q.breaker_failures IS NOT NULL
                                                 AND EXISTS (SELECT FROM backoff.queue_breakers AS b
                                                             WHERE b.queue = q.name AND b.opened_at IS NOT NULL)))))
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT 1
            FOR UPDATE SKIP LOCKED))
        RETURNING j.*;
    ELSE
        RETURN QUERY
        UPDATE backoff.jobs AS j
        SET status = 'running',
            attempts = j.attempts + 1,
            lease_until = backoff._clamp_time(p_now + coalesce(
                p_lease,
                (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
                (backoff._job_policy(j.policy, j.queue)).lease)),
            locked_by = p_worker,
            last_attempted_at = p_now
        WHERE j.segment = backoff._current_segment()
          AND j.id = ANY (ARRAY(
            SELECT c.id
            FROM backoff.jobs AS c
            WHERE c.segment = backoff._current_segment()
              AND c.queue = p_queue
              AND c.status IN ('pending', 'retrying')
              AND c.run_at <= p_now
              AND NOT (backoff._queues_held()
                       AND EXISTS (SELECT FROM backoff.queues AS q
                                   WHERE q.name = p_queue
                                     AND (q.paused OR q.rate IS NOT NULL
                                             OR (q.breaker_failures IS NOT NULL
                                                 AND EXISTS (SELECT FROM backoff.queue_breakers AS b
                                                             WHERE b.queue = q.name AND b.opened_at IS NOT NULL)))))
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT p_limit
            FOR UPDATE SKIP LOCKED))
        RETURNING j.*;
    END IF;
    IF FOUND OR NOT backoff._queues_held() THEN
        RETURN;
    END IF;

    -- Nothing claimed: the queue is empty, paused, or under controls (a
    -- rate, or a breaker that is not closed), which the statement above
    -- leaves to this path. Only now do controls cost a query.
    SELECT q.* INTO v_controls
    FROM backoff.queues AS q
    WHERE q.name = p_queue
      AND NOT q.paused
      AND (q.rate IS NOT NULL
           OR (q.breaker_failures IS NOT NULL
               AND EXISTS (SELECT FROM backoff.queue_breakers AS b WHERE b.queue = q.name AND b.opened_at IS NOT NULL)));
    IF FOUND THEN
        RETURN QUERY SELECT * FROM backoff._claim_controlled(p_queue, p_worker, p_limit, p_lease, p_now, v_controls);
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.claim(text, text, integer, interval, timestamptz) IS
'Claim up to p_limit due jobs (status pending or retrying, run_at <= p_now) of p_queue for p_worker: higher priority first, then earliest run_at, then id. Each becomes running with attempts + 1 (attempts counts every claim of the job and never goes down, so the new value is a fencing token no other claim of the job has: pass it to complete, fail, heartbeat and snooze; the counted attempt that max_attempts bounds is attempts - uncounted_attempts), lease_until = p_now + (p_lease, else the job''s policy lease), locked_by = p_worker, last_attempted_at = p_now. Rows locked by other claimers are skipped (FOR UPDATE SKIP LOCKED), so concurrent claims never overlap. A paused queue (backoff.queues.paused) gives no rows, nor does a queue moving away from this shard (backoffctl shards move, docs/adr/0092). Queue controls (backoff.queues): with an open circuit breaker no rows; half open, at most breaker_probes jobs in total until a complete or fail of the queue closes or reopens it (exact under concurrency; a claim that finds the breaker''s state held by a concurrent transaction gets no rows now); with a rate, at most the whole tokens of the queue''s bucket (rate per second, burst) that concurrent claims do not hold (the bucket is split into up to 16 slots), so fewer rows than p_limit, never waiting. backoff.queue_state says when a claim can return jobs again.
Errors: 22023 for a queue or worker that is not 1 to 128 bytes without control or format characters, a limit < 1, a lease <= 0, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on p_queue. lease_until stays within year 9999.
Example:
SELECT backoff.enqueue(''emails'', ''{"to": "a@example.com"}'');
SELECT id, status, attempts, payload, lease_until - now() AS lease FROM backoff.claim(''emails'', ''worker-1'', 10);';
