-- backoff._breaker_failure(queue, failures, window, cooldown, now): count a
-- failed attempt of a queue with a circuit breaker (docs/adr/0045).
-- Private; called by fail, only for a retryable failure (a job refused as
-- bad input says nothing about the downstream, docs/adr/0059) of a queue
-- whose breaker_failures is set.
--   closed    -> one row appended to backoff.queue_failures (no row is
--                updated), then the failures in (now - window, now] since
--                the last transition are counted through the index, at most
--                p_failures of them; at the threshold the breaker opens
--                (backoff.queue_breakers: opened_at = now, half open from
--                now + cooldown). Two expired log rows are deleted per
--                append, so the log holds about one window of failures.
--   open      -> nothing: the outage is already counted (attempts that
--                were running when it opened still fail).
--   half open -> reopens (opened_at = now): the probe failed.
-- Concurrent fails do not see each other's uncommitted rows, so the
-- breaker may open a few failures late (at most one per concurrent fail);
-- never early. Transitions are guarded on the state they saw, so two
-- concurrent transitions make one. A fail never waits for a row lock: it
-- takes the state row FOR UPDATE SKIP LOCKED before a transition, and a
-- row another transaction holds means that one is changing the state (a
-- half-open reopen that finds a probe-handing claim there logs the
-- failure, which that claim's successor turns into the reopen).
CREATE OR REPLACE FUNCTION backoff._breaker_failure(
    p_queue    text,
    p_failures integer,
    p_window   interval,
    p_cooldown interval,
    p_now      timestamptz
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_state backoff.queue_breakers;
    v_from  timestamptz;
    v_count bigint;
    v_found boolean;
BEGIN
    SELECT * INTO v_state FROM backoff.queue_breakers AS b WHERE b.queue = p_queue;
    v_found := FOUND;
    IF v_state.opened_at IS NOT NULL THEN
        IF p_now >= v_state.half_open_at THEN
            -- Half open: reopen, under the row's lock, if it is free and
            -- still the period this fail saw. A row another transaction
            -- holds is not waited for: a fail reopening it, a complete
            -- closing it, or a claim handing out probes. For the last
            -- one, the failure is logged instead, and the next half-open
            -- claim reopens the breaker from it (backoff._claim_controlled).
            PERFORM FROM backoff.queue_breakers AS b
            WHERE b.queue = p_queue AND b.opened_at = v_state.opened_at
            FOR UPDATE SKIP LOCKED;
            IF FOUND THEN
                UPDATE backoff.queue_breakers AS b
                SET opened_at = p_now,
                    half_open_at = backoff._clamp_time(p_now + p_cooldown),
                    probes_left = NULL,
                    probe_ids = NULL,
                    counted_from = p_now
                WHERE b.queue = p_queue;
            ELSE
                INSERT INTO backoff.queue_failures (queue, failed_at) VALUES (p_queue, p_now);
            END IF;
        END IF;
        RETURN;
    END IF;

    INSERT INTO backoff.queue_failures (queue, failed_at) VALUES (p_queue, p_now);
    -- greatest ignores NULL: no state row yet counts the whole window.
    v_from := greatest(p_now - p_window, v_state.counted_from);
    SELECT count(*) INTO v_count
    FROM (SELECT FROM backoff.queue_failures AS f
          WHERE f.queue = p_queue AND f.failed_at > v_from AND f.failed_at <= p_now
          LIMIT p_failures) AS w;
    -- At the threshold, open it: one transition, made by the fail that
    -- gets the row (or, for a queue whose breaker never opened, the right
    -- to create it) without waiting; concurrent fails at the threshold
    -- skip it, so none of them queues behind the opener's commit.
    IF v_count >= p_failures THEN
        IF v_found THEN
            PERFORM FROM backoff.queue_breakers AS b
            WHERE b.queue = p_queue AND b.opened_at IS NULL
            FOR UPDATE SKIP LOCKED;
            IF FOUND THEN
                UPDATE backoff.queue_breakers AS b
                SET opened_at = p_now,
                    half_open_at = backoff._clamp_time(p_now + p_cooldown),
                    probes_left = NULL,
                    probe_ids = NULL,
                    counted_from = p_now
                WHERE b.queue = p_queue;
            END IF;
        ELSIF pg_catalog.pg_try_advisory_xact_lock(
                  pg_catalog.hashtext('backoff.queue_breakers'), pg_catalog.hashtext(p_queue)) THEN
            -- Only fails create the row, each under this lock, so the
            -- INSERT never waits for another's uncommitted one; a row
            -- committed meanwhile is an open breaker (DO NOTHING).
            INSERT INTO backoff.queue_breakers (queue, opened_at, half_open_at, probes_left, counted_from)
            VALUES (p_queue, p_now, backoff._clamp_time(p_now + p_cooldown), NULL, p_now)
            ON CONFLICT (queue) DO NOTHING;
        END IF;
    END IF;
    -- Prune: rows that no longer count, oldest first, skipping rows another
    -- fail is deleting (never waits).
    DELETE FROM backoff.queue_failures AS f
    WHERE f.ctid = ANY (ARRAY(
        SELECT o.ctid
        FROM backoff.queue_failures AS o
        WHERE o.queue = p_queue AND o.failed_at <= v_from
        ORDER BY o.failed_at
        LIMIT 2
        FOR UPDATE SKIP LOCKED));
END
$$;
