-- backoff._claim_controlled(queue, worker, limit, lease, now, queue row):
-- claim for a queue under controls (docs/adr/0045): a rate, or a breaker
-- that is open or half open. Private; backoff.claim calls it, with its
-- checked arguments and the queue's row, only when its fast statement
-- claimed nothing for such a queue. It never waits for another claimer:
-- a state row or bucket slot another transaction holds is skipped.
--   breaker open (now < half_open_at)  -> nothing.
--   breaker half open                  -> the state row is locked (only
--       here) with SKIP LOCKED: held by another transaction, nothing now;
--       else concurrent claimers hand out exactly probes_left jobs in
--       total: at most that many, and probes_left goes down by the number
--       claimed. The lock is held to the end of the claim's transaction.
--       When every probe is out and none of them is running any more
--       (reaped, snoozed, cancelled, or failed as not retryable: no result
--       about the downstream), a new set is handed out, so a probe whose
--       worker died cannot keep the queue shut. A probe's
--       failure that fail logged because this row was busy reopens it.
--   rate                               -> the bucket is n = least(16,
--       burst) slot rows, each with its share of the burst and of the rate
--       (the shares add up to burst and rate). Free slots are locked
--       fullest first (FOR UPDATE SKIP LOCKED) until their whole tokens
--       cover the limit, each refilled lazily from p_now; at most those
--       whole tokens are claimed, and the slots lose only the tokens of
--       the jobs actually claimed, fullest first (the rest are never taken
--       off). One row update per slot taken from, none when nothing was
--       claimed. A new bucket's slots are created full by one claimer
--       (elected with a try-lock, so no claimer waits).
-- Locks are taken in one order (breaker, then slots), all without
-- waiting; claim never waits for a job row (SKIP LOCKED).
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
    v_failed   timestamptz;
    v_burst    integer;
    v_nslots   integer;
    v_pass     integer;
    v_cur      refcursor;
    v_slot     smallint;
    v_avail    double precision;
    v_sum      double precision;
    v_slots    smallint[];
    v_avails   double precision[];
    v_left     double precision;
    v_take     double precision;
    v_wslots   smallint[];
    v_wtokens  double precision[];
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
            -- latest version (a fail may have reopened it, a complete closed
            -- it). A row another transaction holds (a claim handing out
            -- probes, a fail reopening, a complete closing) gives nothing
            -- now rather than a wait.
            SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue
            FOR UPDATE SKIP LOCKED;
            IF NOT FOUND THEN
                RETURN;
            END IF;
            IF v_state.opened_at IS NOT NULL THEN
                IF p_now < v_state.half_open_at THEN
                    RETURN;
                END IF;
                -- A probe's fail that found this row locked logged its
                -- failure instead of reopening (backoff._breaker_failure):
                -- reopen on its behalf, from the time it failed.
                SELECT pg_catalog.max(f.failed_at) INTO v_failed
                FROM backoff.queue_failures AS f
                WHERE f.queue = p_queue AND f.failed_at >= v_state.half_open_at
                  AND f.failed_at > v_state.counted_from;
                IF v_failed IS NOT NULL THEN
                    UPDATE backoff.queue_breakers AS b
                    SET opened_at = v_failed,
                        half_open_at = backoff._clamp_time(v_failed + p_q.breaker_cooldown),
                        probes_left = NULL,
                        probe_ids = NULL,
                        counted_from = v_failed
                    WHERE b.queue = p_queue;
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
        v_burst := backoff._queue_burst(p_q.rate, p_q.burst);
        v_nslots := least(16, v_burst);
        FOR v_pass IN 1..2 LOOP
            -- Take free slots, fullest first, until their whole tokens
            -- cover the limit; a slot another claimer holds is skipped
            -- (never waited for). Each slot's tokens are refilled lazily
            -- from p_now at its share of the rate, up to its share of the
            -- burst; a clock behind refilled_at adds nothing.
            v_sum := 0;
            v_slots := '{}';
            v_avails := '{}';
            OPEN v_cur FOR
                SELECT t.slot,
                       least(v_burst / v_nslots + (t.slot < v_burst % v_nslots)::integer,
                             t.tokens + p_q.rate * (v_burst / v_nslots + (t.slot < v_burst % v_nslots)::integer) / v_burst
                                 * greatest(0, extract(epoch FROM p_now - t.refilled_at)::double precision)) AS avail
                FROM backoff.queue_tokens AS t
                WHERE t.queue = p_queue AND t.slot < v_nslots
                ORDER BY 2 DESC, t.slot DESC
                FOR UPDATE OF t SKIP LOCKED;
            LOOP
                FETCH v_cur INTO v_slot, v_avail;
                EXIT WHEN NOT FOUND;
                v_slots := v_slots || v_slot;
                v_avails := v_avails || v_avail;
                v_sum := v_sum + v_avail;
                -- (1e-9: a slot's share of the rate is a fraction, so a sum
                -- of refills can fall a rounding error short of a token.)
                EXIT WHEN v_sum + 1e-9 >= v_allow;
            END LOOP;
            CLOSE v_cur;
            EXIT WHEN v_sum + 1e-9 >= v_allow OR v_pass = 2;
            -- Fewer tokens than asked: create the slots a new bucket lacks
            -- (full). One creator at a time, elected without waiting: a
            -- claimer that loses gets what it holds now.
            EXIT WHEN (SELECT pg_catalog.count(*) FROM backoff.queue_tokens AS t
                       WHERE t.queue = p_queue AND t.slot < v_nslots) >= v_nslots;
            EXIT WHEN NOT pg_catalog.pg_try_advisory_xact_lock(
                pg_catalog.hashtext('backoff.queue_tokens'), pg_catalog.hashtext(p_queue));
            INSERT INTO backoff.queue_tokens (queue, slot, tokens, refilled_at)
            SELECT p_queue, s.slot, v_burst / v_nslots + (s.slot < v_burst % v_nslots)::integer, p_now
            FROM pg_catalog.generate_series(0, v_nslots - 1) AS s(slot)
            ON CONFLICT (queue, slot) DO NOTHING;
        END LOOP;
        v_allow := least(v_allow::double precision, floor(v_sum + 1e-9))::integer;
        IF v_allow < 1 THEN
            RETURN;
        END IF;
    END IF;

    -- backoff.claim's statement, with the allowance as its limit. Without
    -- probes to record, the rows go straight to the result (RETURN QUERY,
    -- counted afterwards); a half-open breaker's claim keeps them to record
    -- the probes' ids.
    IF v_probes IS NULL THEN
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
            ORDER BY c.priority DESC, c.run_at, c.id
            LIMIT v_allow
            FOR UPDATE SKIP LOCKED))
        RETURNING j.*;
        GET DIAGNOSTICS v_count = ROW_COUNT;
        IF v_count = 0 THEN
            RETURN;
        END IF;
    ELSE
        WITH claimed AS (
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
    END IF;
    IF v_probes IS NOT NULL THEN
        UPDATE backoff.queue_breakers AS b
        SET probes_left = v_probes - v_count,
            probe_ids = v_ids || ARRAY(SELECT r.id FROM pg_catalog.unnest(v_jobs) AS r)
        WHERE b.queue = p_queue;
    END IF;
    IF p_q.rate IS NOT NULL THEN
        -- Take the claimed jobs' tokens from the slots held, fullest first;
        -- a slot nothing was taken from is not written.
        v_left := v_count;
        v_wslots := '{}';
        v_wtokens := '{}';
        FOR i IN 1 .. pg_catalog.cardinality(v_slots) LOOP
            EXIT WHEN v_left <= 0;
            v_take := least(v_left, v_avails[i]);
            v_wslots := v_wslots || v_slots[i];
            v_wtokens := v_wtokens || greatest(0, v_avails[i] - v_take);
            v_left := v_left - v_take;
        END LOOP;
        IF pg_catalog.cardinality(v_wslots) = 1 THEN  -- the usual case
            UPDATE backoff.queue_tokens AS t
            SET tokens = v_wtokens[1], refilled_at = greatest(t.refilled_at, p_now)
            WHERE t.queue = p_queue AND t.slot = v_wslots[1];
            RETURN;
        END IF;
        UPDATE backoff.queue_tokens AS t
        SET tokens = w.tokens, refilled_at = greatest(t.refilled_at, p_now)
        FROM ROWS FROM (pg_catalog.unnest(v_wslots), pg_catalog.unnest(v_wtokens)) AS w(slot, tokens)
        WHERE t.queue = p_queue AND t.slot = w.slot;
    END IF;
END
$$;
