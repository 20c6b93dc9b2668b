-- backoff._claim_controlled(queue, worker, limit, lease, now, queue row):
-- claim for a queue under controls (docs/adr/0045): a rate, or a breaker
-- that is open or half open. Private; backoff.claim calls it, with its
-- checked arguments and the queue's row, only when its fast statement
-- claimed nothing for such a queue.
--   breaker open (now < half_open_at)  -> nothing.
--   breaker half open                  -> the state row is locked (only
--       here), so concurrent claimers hand out exactly probes_left jobs in
--       total: at most that many, and probes_left goes down by the number
--       claimed. The lock is held to the end of the claim's transaction.
--       When every probe is out and none of them is running any more
--       (reaped, snoozed or cancelled: no result), a new set is handed out,
--       so a probe whose worker died cannot keep the queue shut.
--   rate                               -> the bucket row is locked,
--       refilled lazily from p_now (rate tokens per second up to burst, a
--       NULL burst being greatest(1, ceil(rate))), and at most its whole
--       tokens are claimed; the bucket loses only the tokens of the jobs
--       actually claimed (the rest are given back: they were never taken
--       off). One row update per call, none when nothing was claimed.
-- Locks are taken in one order (breaker, then bucket), so claimers do not
-- deadlock; settling a job (fail, complete) locks only the breaker row, and
-- claim never waits for a job row (SKIP LOCKED).
CREATE OR REPLACE FUNCTION backoff._claim_controlled(
    p_queue  text,
    p_worker text,
    p_limit  integer,
    p_lease  interval,
    p_now    timestamptz,
    p_q      backoff.queues
)
RETURNS SETOF backoff.jobs
LANGUAGE plpgsql
VOLATILE
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_allow    integer := p_limit;
    v_state    backoff.queue_breakers;
    v_probes   integer;
    v_burst    double precision;
    v_tokens   double precision;
    v_refilled timestamptz;
    v_count    integer;
    v_jobs     backoff.jobs[];
    v_ids      bigint[];
BEGIN
    IF p_q.breaker_failures IS NOT NULL THEN
        SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue;
        IF v_state.opened_at IS NOT NULL THEN
            IF p_now < v_state.half_open_at THEN
                RETURN;  -- open
            END IF;
            -- Half open: count the probes under the row's lock, on its
            -- latest version (a fail may have reopened it, a complete closed it).
            SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue FOR UPDATE;
            IF v_state.opened_at IS NOT NULL THEN
                IF p_now < v_state.half_open_at THEN
                    RETURN;
                END IF;
                v_probes := coalesce(v_state.probes_left, p_q.breaker_probes);
                v_ids := coalesce(v_state.probe_ids, '{}');
                IF v_probes < 1 THEN
                    IF EXISTS (SELECT FROM backoff.jobs AS j
                               WHERE j.id = ANY (v_state.probe_ids) AND j.status = 'running') THEN
                        RETURN;  -- every probe is out: wait for a result
                    END IF;
                    v_probes := p_q.breaker_probes;
                    v_ids := '{}';
                END IF;
                v_allow := least(v_allow, v_probes);
            END IF;
        END IF;
    END IF;

    IF p_q.rate IS NOT NULL THEN
        -- The default burst, like queue_state's, stays an integer.
        v_burst := coalesce(p_q.burst, least(greatest(1, ceil(p_q.rate)), 2147483647));
        SELECT t.tokens, t.refilled_at INTO v_tokens, v_refilled
        FROM backoff.queue_tokens AS t WHERE t.queue = p_queue FOR UPDATE;
        IF NOT FOUND THEN
            -- A bucket starts full.
            INSERT INTO backoff.queue_tokens (queue, tokens, refilled_at)
            VALUES (p_queue, v_burst, p_now)
            ON CONFLICT (queue) DO NOTHING;
            SELECT t.tokens, t.refilled_at INTO v_tokens, v_refilled
            FROM backoff.queue_tokens AS t WHERE t.queue = p_queue FOR UPDATE;
        END IF;
        -- A clock behind refilled_at adds nothing (and takes nothing back).
        v_tokens := least(v_burst, v_tokens
            + p_q.rate * greatest(0, extract(epoch FROM p_now - v_refilled)::double precision));
        v_refilled := greatest(v_refilled, p_now);
        v_allow := least(v_allow::double precision, floor(v_tokens))::integer;
        IF v_allow < 1 THEN
            RETURN;
        END IF;
    END IF;

    -- backoff.claim's statement, with the allowance as its limit; the rows
    -- are kept to count them and to record the probes.
    WITH claimed AS (
    UPDATE backoff.jobs AS j
    SET status = 'running',
        attempts = j.attempts + 1,
        lease_until = backoff._clamp_time(p_now + coalesce(
            p_lease,
            (SELECT p.lease FROM backoff.policies AS p WHERE p.name = j.policy),
            (SELECT p.lease FROM backoff.queues AS q JOIN backoff.policies AS p ON p.name = q.policy
             WHERE q.name = j.queue),
            (backoff._job_policy(j.policy, j.queue)).lease)),
        locked_by = p_worker,
        last_attempted_at = p_now
    WHERE j.id = ANY (ARRAY(
        SELECT c.id
        FROM backoff.jobs AS c
        WHERE c.queue = p_queue
          AND c.status IN ('pending', 'retrying')
          AND c.run_at <= p_now
        ORDER BY c.priority DESC, c.run_at, c.id
        LIMIT v_allow
        FOR UPDATE SKIP LOCKED))
    RETURNING j AS job)
    SELECT pg_catalog.array_agg(c.job) INTO v_jobs FROM claimed AS c;
    v_count := coalesce(pg_catalog.cardinality(v_jobs), 0);
    IF v_count = 0 THEN
        RETURN;
    END IF;
    RETURN QUERY SELECT * FROM pg_catalog.unnest(v_jobs);
    IF v_probes IS NOT NULL THEN
        UPDATE backoff.queue_breakers AS b
        SET probes_left = v_probes - v_count,
            probe_ids = v_ids || ARRAY(SELECT r.id FROM pg_catalog.unnest(v_jobs) AS r)
        WHERE b.queue = p_queue;
    END IF;
    IF p_q.rate IS NOT NULL THEN
        UPDATE backoff.queue_tokens AS t
        SET tokens = v_tokens - v_count, refilled_at = v_refilled
        WHERE t.queue = p_queue;
    END IF;
END
$$;
