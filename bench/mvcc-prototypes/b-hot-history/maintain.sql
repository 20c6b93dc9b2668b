-- b.maintain(rotate_after, move_max, lock_timeout): run every few seconds.
-- Each step is its own transaction (a procedure that commits), so no step
-- holds a lock for longer than it takes.
--
-- 1. Switch: when the current segment has taken p_rotate_after jobs and
--    the next segment is free, the next one becomes current and the old
--    one draining. If the next one is not free yet (a backlog), the current
--    segment keeps taking jobs.
-- 2. Move: a draining segment with at most p_move_max live rows has them
--    moved to the current segment (DELETE ... RETURNING into INSERT), each
--    row locked with FOR UPDATE SKIP LOCKED so that a claimer or a
--    completer holding it is skipped, not waited for. A segment with more
--    live rows is left to the claimers, which take its rows first (they
--    are older), rather than copying a backlog at every switch.
-- 3. Truncate: under lock_timeout, LOCK the segment ACCESS EXCLUSIVE, check
--    it is empty (a fresh snapshot, after every writer that held a lock
--    has committed: an enqueue that read the old segment as current, a
--    row a claimer held during the move), then TRUNCATE it and mark it
--    free. Without the lock in time, it is tried again at the next call.
--    While the LOCK waits, new statements on b.hot wait behind it: that is
--    the stall lock_timeout bounds.
CREATE PROCEDURE b.maintain(p_rotate_after bigint DEFAULT 10000, p_move_max integer DEFAULT 2000,
                            p_lock_timeout text DEFAULT '50ms')
LANGUAGE plpgsql AS $$
DECLARE
    v_cur   smallint;
    v_first bigint;
    v_last  bigint;
    v_next  smallint;
    v_seg   smallint;
    v_live  bigint;
    v_moved bigint;
    v_t     timestamptz;
BEGIN
    SELECT s.seg, s.first_id INTO v_cur, v_first FROM b.segments AS s WHERE s.state = 'current';
    SELECT q.last_value INTO v_last FROM b.jobs_id_seq AS q;
    v_next := (v_cur + 1) % 3;
    IF v_last - v_first >= p_rotate_after THEN
        IF (SELECT s.state FROM b.segments AS s WHERE s.seg = v_next) = 'free' THEN
            UPDATE b.segments SET state = 'draining' WHERE seg = v_cur;
            UPDATE b.segments SET state = 'current', switched_at = now(), first_id = v_last WHERE seg = v_next;
            RAISE NOTICE 'switch: segment % -> % after % jobs', v_cur, v_next, v_last - v_first;
            v_cur := v_next;
        ELSE
            RAISE NOTICE 'switch: segment % not free, % keeps taking jobs (% so far)', v_next, v_cur, v_last - v_first;
        END IF;
    END IF;
    COMMIT;

    FOR v_seg IN SELECT s.seg FROM b.segments AS s WHERE s.state = 'draining' ORDER BY s.switched_at LOOP
        SELECT count(*) INTO v_live FROM (SELECT FROM b.hot AS h WHERE h.seg = v_seg LIMIT p_move_max + 1) AS x;
        IF v_live > p_move_max THEN
            RAISE NOTICE 'segment %: more than % live rows, left to the claimers', v_seg, p_move_max;
            CONTINUE;
        END IF;
        v_t := clock_timestamp();
        WITH m AS (
            DELETE FROM b.hot AS h
            WHERE h.seg = v_seg
              AND h.id = ANY (ARRAY(SELECT c.id FROM b.hot AS c WHERE c.seg = v_seg FOR UPDATE SKIP LOCKED))
            RETURNING h.*
        )
        INSERT INTO b.hot (seg, id, queue, payload, status, priority, attempts, run_at, lease_until, locked_by, created_at)
        SELECT v_cur, m.id, m.queue, m.payload, m.status, m.priority, m.attempts, m.run_at, m.lease_until,
               m.locked_by, m.created_at
        FROM m;
        GET DIAGNOSTICS v_moved = ROW_COUNT;
        COMMIT;
        RAISE NOTICE 'segment %: moved % of % live rows to % in % ms', v_seg, v_moved, v_live, v_cur,
            round(extract(epoch FROM clock_timestamp() - v_t) * 1000, 1);
        v_t := clock_timestamp();
        BEGIN
            PERFORM set_config('lock_timeout', p_lock_timeout, true);
            EXECUTE format('LOCK TABLE b.%I IN ACCESS EXCLUSIVE MODE', 'hot_' || v_seg);
            IF EXISTS (SELECT FROM b.hot AS h WHERE h.seg = v_seg) THEN
                RAISE NOTICE 'segment %: rows arrived after the move, truncate later', v_seg;
            ELSE
                EXECUTE format('TRUNCATE b.%I', 'hot_' || v_seg);
                UPDATE b.segments SET state = 'free' WHERE seg = v_seg;
                RAISE NOTICE 'segment %: truncated in % ms (lock included)', v_seg,
                    round(extract(epoch FROM clock_timestamp() - v_t) * 1000, 1);
            END IF;
        EXCEPTION WHEN lock_not_available THEN
            RAISE NOTICE 'segment %: no lock within %, truncate later', v_seg, p_lock_timeout;
        END;
        COMMIT;
    END LOOP;
END
$$;
