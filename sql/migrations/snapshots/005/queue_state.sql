-- backoff.queue_state(queue, now): where a queue's controls stand at p_now
-- (docs/adr/0045): the circuit breaker's state, when it opened, the
-- failures counted in its window, the probes a half-open breaker still
-- hands out, the rate limit and the tokens in its bucket, and when a claim
-- can return jobs again. A pure read: an open breaker past its cooldown
-- reads as half_open, and the bucket's lazy refill is computed, not
-- written. One row, also for a queue without a backoff.queues row.
CREATE OR REPLACE FUNCTION backoff.queue_state(
    p_queue text,
    p_now   timestamptz DEFAULT NULL
)
RETURNS TABLE (
    queue         text,
    state         text,
    opened_at     timestamptz,
    failures      bigint,
    probes_left   integer,
    rate          double precision,
    burst         integer,
    tokens        double precision,
    next_claim_at timestamptz
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_q        backoff.queues;
    v_state    backoff.queue_breakers;
    v_tokens   double precision;
    v_caps     double precision;
    v_nslots   integer;
BEGIN
    p_queue := backoff._check_name('queue', p_queue);
    p_now := backoff._now(p_now);
    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_queue(ARRAY[p_queue], 'work');
    END IF;

    SELECT * INTO v_q FROM backoff.queues AS q WHERE q.name = p_queue;
    queue := p_queue;
    state := 'closed';
    failures := 0;

    IF v_q.breaker_failures IS NOT NULL THEN
        SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue;
        IF v_state.opened_at IS NOT NULL THEN
            opened_at := v_state.opened_at;
            IF p_now < v_state.half_open_at THEN
                state := 'open';
                next_claim_at := v_state.half_open_at;
            ELSE
                state := 'half_open';
                probes_left := coalesce(v_state.probes_left, v_q.breaker_probes);
            END IF;
        END IF;
        -- What fail counts toward the threshold: the window, since the
        -- breaker last changed state.
        SELECT count(*) INTO failures
        FROM backoff.queue_failures AS f
        WHERE f.queue = p_queue
          AND f.failed_at > greatest(p_now - v_q.breaker_window, v_state.counted_from)
          AND f.failed_at <= p_now;
    END IF;

    IF v_q.rate IS NOT NULL THEN
        rate := v_q.rate;
        burst := backoff._queue_burst(v_q.rate, v_q.burst);
        v_nslots := least(16, burst);
        -- The bucket's slots (backoff._claim_controlled), each refilled at
        -- its share of the rate up to its share of the burst; a slot not
        -- created yet is full.
        SELECT pg_catalog.sum(s.cap),
               pg_catalog.sum(least(s.cap, t.tokens + v_q.rate * s.cap / burst
                   * greatest(0, extract(epoch FROM p_now - t.refilled_at)::double precision)))
        INTO v_caps, v_tokens
        FROM backoff.queue_tokens AS t
        CROSS JOIN LATERAL (SELECT (burst / v_nslots + (t.slot < burst % v_nslots)::integer)::double precision AS cap) AS s
        WHERE t.queue = p_queue AND t.slot < v_nslots;
        tokens := coalesce(v_tokens, 0) + (burst - coalesce(v_caps, 0));
        -- (1e-9: as claim, which takes the tokens of all the free slots
        -- it needs, counts a whole token.)
        IF tokens + 1e-9 < 1 AND state <> 'half_open' THEN
            -- The next whole token: until then no slot is full (each holds
            -- at least one), so the slots together refill at rate. The wait
            -- is bounded so that the sum stays a time.
            next_claim_at := greatest(next_claim_at, backoff._clamp_time(p_now
                + least((1 - tokens) / v_q.rate, 3155760000::double precision) * interval '1 second'));
        END IF;
    END IF;

    IF v_q.paused THEN
        next_claim_at := NULL;  -- a pause has no end time
    END IF;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION backoff.queue_state(text, timestamptz) IS
'The controls of p_queue at p_now (backoff.queues: rate, burst, breaker_failures, breaker_window, breaker_cooldown, breaker_probes), one row, also for a queue without a row (all off): queue; state closed, open or half_open (closed without a breaker; an open breaker past its cooldown reads half_open, nothing is written); opened_at (NULL when closed); failures, the fails counted toward breaker_failures in (p_now - breaker_window, p_now] since the breaker last changed state (0 without a breaker); probes_left (half open: jobs claim still hands out before a result closes or reopens the breaker; else NULL); rate; burst (the bucket size: burst, else greatest(1, ceil(rate)), at most 2147483647); tokens available at p_now (NULL without a rate); next_claim_at: NULL when controls let a claim return jobs now, else when the cooldown ends or the next whole token arrives, whichever is later; NULL too for a paused queue (no end time) and for a half-open breaker whose probes are all out (it waits for a result). Only retryable fails count as failures: not a fail with p_retryable false (bad input), not a lease expiry.
Errors: 22023 for a queue that is not 1 to 128 bytes without control or format characters, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on p_queue.
Example:
UPDATE backoff.queues SET rate = 5, breaker_failures = 3, breaker_window = ''30 seconds'', breaker_cooldown = ''1 minute'' WHERE name = ''emails'';
SELECT state, failures, tokens, next_claim_at FROM backoff.queue_state(''emails'');';
