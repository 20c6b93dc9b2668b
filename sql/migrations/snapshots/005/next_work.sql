-- backoff.next_work(queues, worker, ttl, now): one look for an idle Worker
-- (docs/adr/0083). Instead of an empty claim and a queue_state per queue
-- every poll interval, and fire_schedules, reap and rotate on their own
-- tickers, a Worker with nothing to do asks once per poll interval when
-- each of these next has work, and calls only what has:
--   * kind 'queue', one row per p_queues element: the earliest run_at of
--     its pending and retrying jobs in the current live segment (the only
--     one claim takes from), pushed back to when its controls let a claim
--     return jobs (queue_state's next_claim_at); NULL when it has none or
--     the queue is paused (a pause has no end time: resume notifies
--     nothing, so the next look after it sees the jobs);
--   * kind 'schedules': the earliest next_fire_at of the schedules not
--     paused that the caller may fire (fire_schedules' own scope);
--   * kind 'reap': the earliest lease_until of the running jobs the caller
--     may reap: reap has work once it has passed;
--   * kind 'rotate': p_now when a live segment other than the current one
--     holds rows (a switch left rows that rotate has not moved yet: claims
--     cannot see them until it does), else NULL.
-- The caller's wake-up registrations (backoff.wait_for_jobs) of p_queues
-- are renewed only when missing or expiring within a third of p_ttl, so
-- most looks write nothing and take no transaction id: a look every
-- second must not leave a dead row per second under a held snapshot
-- (docs/adr/0079). Reads at the caller's isolation level; the answer is a
-- hint (the Worker claims to find out), never a promise.
CREATE OR REPLACE FUNCTION backoff.next_work(
    p_queues text[],
    p_worker text DEFAULT NULL,
    p_ttl    interval DEFAULT interval '30 seconds',
    p_now    timestamptz DEFAULT now()
)
RETURNS TABLE (kind text, queue text, at timestamptz)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET enable_seqscan = off
SET jit = off
AS $$
#variable_conflict use_column
DECLARE
    v_q       text;
    v_ctl     backoff.queues;
    v_at      timestamptz;
    v_next    timestamptz;
    v_scope   text[] := backoff._queue_scope('work');
    v_fire    text[];
    v_renew   text[];
BEGIN
    IF p_queues IS NULL OR cardinality(p_queues) > 1000 THEN
        RAISE EXCEPTION 'next work: queues must be an array of at most 1000 names, got %',
            coalesce(cardinality(p_queues)::text || ' names', 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    p_queues := ARRAY(SELECT DISTINCT backoff._check_name('queue', u.q) FROM unnest(p_queues) AS u(q));
    IF p_worker IS NOT NULL THEN
        p_worker := backoff._check_name('worker', p_worker);
        IF p_ttl IS NULL OR p_ttl <= interval '0' OR p_ttl > interval '1 day' THEN
            RAISE EXCEPTION 'next work: ttl must be positive and at most 1 day, got "%"', coalesce(p_ttl::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    p_now := backoff._now(p_now);
    IF cardinality(p_queues) > 0 AND backoff._scope_in_force() THEN
        PERFORM backoff._check_queue(p_queues, 'work');
    END IF;

    kind := 'queue';
    FOREACH v_q IN ARRAY p_queues LOOP
        queue := v_q;
        SELECT min(c.run_at) INTO v_at
        FROM backoff.jobs AS c
        WHERE c.segment = backoff._current_segment()
          AND c.queue = v_q
          AND c.status IN ('pending', 'retrying');
        SELECT * INTO v_ctl FROM backoff.queues AS q WHERE q.name = v_q;
        IF v_ctl.paused THEN
            v_at := NULL;
        ELSIF v_at IS NOT NULL AND (v_ctl.rate IS NOT NULL OR v_ctl.breaker_failures IS NOT NULL) THEN
            SELECT s.next_claim_at INTO v_next FROM backoff.queue_state(v_q, p_now) AS s;
            v_at := greatest(v_at, v_next);
        END IF;
        at := v_at;
        RETURN NEXT;
    END LOOP;

    queue := NULL;
    kind := 'schedules';
    v_fire := backoff._queue_scope('work') || backoff._queue_scope('produce');
    at := (SELECT min(s.next_fire_at) FROM backoff.schedules AS s
           WHERE NOT s.paused
             AND (v_fire IS NULL OR s.queue OPERATOR(pg_catalog.~~) ANY (v_fire)));
    RETURN NEXT;

    kind := 'reap';
    at := (SELECT min(r.lease_until) FROM backoff.jobs AS r
           WHERE r.lease_until IS NOT NULL
             AND (v_scope IS NULL OR r.queue OPERATOR(pg_catalog.~~) ANY (v_scope)));
    RETURN NEXT;

    kind := 'rotate';
    at := CASE WHEN EXISTS (SELECT FROM backoff.jobs AS j
                            WHERE j.segment > 0 AND j.segment <> backoff._current_segment())
               THEN p_now END;
    RETURN NEXT;

    -- Renew only what would otherwise expire before a third of p_ttl: the
    -- registrations follow the database's clock, as wait_for_jobs.
    IF p_worker IS NOT NULL AND cardinality(p_queues) > 0 THEN
        v_renew := ARRAY(
            SELECT u.q FROM unnest(p_queues) AS u(q)
            WHERE NOT EXISTS (SELECT FROM backoff.waiting_workers AS w
                              WHERE w.queue = u.q AND w.worker = p_worker
                                AND w.expires_at > pg_catalog.now() + p_ttl / 3));
        IF cardinality(v_renew) > 0 THEN
            INSERT INTO backoff.waiting_workers AS w (queue, worker, expires_at)
            SELECT u.q, p_worker, pg_catalog.now() + p_ttl FROM unnest(v_renew) AS u(q)
            ON CONFLICT (queue, worker) DO UPDATE SET expires_at = excluded.expires_at;
            DELETE FROM backoff.waiting_workers AS w
            WHERE w.queue = ANY (v_renew) AND w.expires_at < pg_catalog.now();
        END IF;
    END IF;
END
$$;

COMMENT ON FUNCTION backoff.next_work(text[], text, interval, timestamptz) IS
'One look for an idle worker (docs/adr/0083): when each kind of work next comes due at p_now, so that a worker with nothing to do sends this once per poll interval instead of an empty claim and a queue_state per queue, fire_schedules, reap and rotate. Rows: kind queue, one per distinct element of p_queues: the earliest run_at of its pending and retrying jobs that claim can see, no earlier than when its controls let a claim return jobs (queue_state''s next_claim_at), NULL when it has none or is paused; kind schedules (queue NULL): the earliest next_fire_at of the schedules not paused that the caller may fire, NULL when none; kind reap: the earliest lease_until of the running jobs (reap has work once it has passed), NULL when none; kind rotate: p_now when a live segment other than the current one holds rows that rotate has yet to move, else NULL. A time at or before p_now means that call has work now. With p_worker, the worker''s wake-up registrations (backoff.wait_for_jobs) of p_queues are written when missing or expiring within p_ttl / 3, for p_ttl from now() (the database clock); otherwise nothing is written, so most looks take no transaction id. A hint read at the caller''s isolation level: the claim decides.
Errors: 22023 for p_queues NULL or over 1000 names, a queue or worker that is not 1 to 128 bytes without control or format characters, with p_worker a ttl that is NULL, not positive or over 1 day, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock; 42501 when the caller is scoped by backoff.grant_queue and may not work on one of p_queues.
Example:
SELECT backoff.enqueue(''emails'', ''{}'', p_run_at => now() + interval ''1 minute'');
SELECT kind, queue, at <= now() AS due FROM backoff.next_work(ARRAY[''emails'', ''reports''], ''worker-1'');';
