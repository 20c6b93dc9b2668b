-- backoff.rotate(now): the maintenance of the live segments (docs/adr/0061),
-- called beside reap (the Workers' maintenance loop, backoff.maintain). Each call:
-- 1. Switch: when the current segment has taken backoff.settings.segment_jobs
--    jobs (counted from the id sequence) and at least as many as there are
--    live jobs, the next segment that is empty on disk becomes current
--    (backoff._next_segment; when none is, because a transaction that read
--    backoff.jobs holds off their truncate, a new one is added, up to
--    v_max_segments: docs/adr/0082). "At least the live jobs" keeps the
--    rows moved below at no more than one per job enqueued, whatever the
--    backlog.
-- 2. Move: the rows left in the other live segments (and a live row an
--    admin inserted into segment 0) go to the current segment, a finished
--    one to segment 0 (backoff._move_to_current_segment and
--    backoff._move_finished), locked first with FOR UPDATE SKIP LOCKED: a
--    row a claimer or a completer holds is left for the next call, nobody
--    waits for rotate. A by-id call that waited for a row rotate moved runs
--    its statement once more and finds it.
-- 3. Truncate: a segment that was not current when the call began and holds
--    no row is truncated, under a lock_timeout of 50 ms: TRUNCATE drops its
--    dead row versions and index entries whatever snapshot is open, which
--    vacuum cannot. While the LOCK waits, new statements on that segment
--    queue behind it, so the timeout is the longest stall it may cause; a
--    transaction that has read backoff.jobs holds a lock until it ends, and
--    the truncate is then tried again at the next call. The segments left
--    most recently are tried first, and the first lock not granted ends
--    the tries of the call: the older ones are those such a transaction
--    holds, and each try would stall their statements again. Only at READ
--    COMMITTED: see below.
-- It also publishes that no queue has a control any more, once none has
-- (backoff._sync_queues_held, docs/adr/0094).
-- One call at a time: a call that finds another one running does nothing.
-- Each call is recorded for backoff.liveness (docs/adr/0079), with the
-- worker that names itself in p_worker (the Workers do, beside each reap,
-- busy or idle: what "workers seen" counts); a truncate too.
CREATE OR REPLACE FUNCTION backoff.rotate(
    p_now    timestamptz DEFAULT now(),
    p_worker text DEFAULT NULL
)
RETURNS TABLE (current_segment smallint, switched_from smallint, moved bigint, truncated smallint[], note text)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_cur     smallint;
    v_first   bigint;
    v_last    bigint;
    v_limit   bigint;
    v_live    bigint;
    v_seg     smallint;
    v_n       bigint;
    v_batch   constant integer := 5000;
    v_was     smallint[];
    v_ids     bigint[];
    v_timeout text;
    -- At most this many live segments (docs/adr/0082): three for the ring,
    -- the rest for the time a reader holds them.
    v_max_segments constant integer := 8;
    v_switch  record;
BEGIN
    p_now := backoff._now(p_now);
    IF p_worker IS NOT NULL THEN
        p_worker := backoff._check_name('worker', p_worker);
    END IF;
    PERFORM backoff._note_maintenance('rotate', p_worker, p_now);
    moved := 0;
    truncated := '{}';
    SELECT s.segment, s.first_id INTO v_cur, v_first
    FROM backoff.segments AS s
    WHERE s.current
    FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        current_segment := (SELECT s.segment FROM backoff.segments AS s WHERE s.current);
        note := 'another rotate is running';
        RETURN NEXT;
        RETURN;
    END IF;
    -- The segments left most recently first (step 3).
    v_was := ARRAY(SELECT s.segment FROM backoff.segments AS s WHERE NOT s.current
                   ORDER BY s.switched_at DESC, s.segment);

    -- 1. Switch.
    v_last := coalesce(pg_catalog.pg_sequence_last_value('backoff.jobs_id_seq'::pg_catalog.regclass), 0);
    SELECT coalesce((SELECT st.segment_jobs FROM backoff.settings AS st LIMIT 1), 5000) INTO v_limit;
    IF v_last - v_first >= v_limit THEN
        SELECT count(*) INTO v_live
        FROM (SELECT FROM backoff.jobs AS j WHERE j.segment > 0 LIMIT v_last - v_first + 1) AS l;
        IF v_live > v_last - v_first THEN
            note := pg_catalog.format('segment %s keeps taking jobs: more jobs are live than the %s it has taken',
                                      v_cur, v_last - v_first);
        ELSE
            SELECT * INTO v_switch FROM backoff._next_segment(v_cur, v_max_segments);
            IF v_switch.segment IS NULL THEN
                note := pg_catalog.format('segment %s keeps taking jobs: %s', v_cur, v_switch.note);
            ELSE
                note := v_switch.note;
                IF v_switch.added THEN
                    INSERT INTO backoff.segments (segment, current, first_id, switched_at)
                    VALUES (v_switch.segment, false, v_last, p_now);
                END IF;
                UPDATE backoff.segments AS s SET current = false WHERE s.segment = v_cur;
                UPDATE backoff.segments AS s SET current = true, first_id = v_last, switched_at = p_now
                WHERE s.segment = v_switch.segment;
                switched_from := v_cur;
                v_cur := v_switch.segment;
            END IF;
        END IF;
    END IF;
    current_segment := v_cur;
    -- Publish the switch to the statements that prune by it, in this
    -- transaction; and again if the two ever disagree (a restore that wrote
    -- backoff.segments).
    IF backoff._current_segment() IS DISTINCT FROM v_cur THEN
        PERFORM backoff._publish_current_segment(v_cur);
    END IF;
    -- Whether some queue has a control: false once none has (docs/adr/0094).
    PERFORM backoff._sync_queues_held();

    -- 2. Move what is left behind, in batches.
    FOR v_seg IN SELECT 0::smallint UNION ALL (SELECT s.segment FROM backoff.segments AS s WHERE s.segment <> v_cur ORDER BY 1) LOOP
        LOOP
            -- Locked here, skipping rows others hold; moved by the calls'
            -- own moves (the live ones as the by-id calls move a job they
            -- find elsewhere, the finished ones as fail and reap
            -- move a dead letter), which find them locked by this
            -- transaction and wait for nobody.
            IF v_seg = 0 THEN
                -- Segment 0: its live rows only, found through the claim
                -- and lease indexes. A statement of its own, whose
                -- conditions are constants: one statement for every
                -- segment has a generic plan that cannot use those partial
                -- indexes and reads the whole finished partition.
                v_ids := ARRAY(
                    SELECT c.id FROM backoff.jobs AS c
                    WHERE c.segment = 0
                      AND (c.status IN ('pending', 'retrying') OR c.lease_until IS NOT NULL)
                    LIMIT v_batch
                    FOR UPDATE SKIP LOCKED);
            ELSE
                v_ids := ARRAY(
                    SELECT c.id FROM backoff.jobs AS c
                    WHERE c.segment = v_seg
                    LIMIT v_batch
                    FOR UPDATE SKIP LOCKED);
            END IF;
            v_n := cardinality(v_ids);
            IF v_n > 0 THEN
                moved := moved + backoff._move_to_current_segment(v_ids);
                IF v_seg <> 0 THEN
                    moved := moved + (SELECT count(*) FROM backoff._move_finished(v_ids));
                END IF;
            END IF;
            EXIT WHEN v_n < v_batch;
        END LOOP;
    END LOOP;

    -- 3. Truncate the segments that were not current when the call began
    -- (enqueues may still be inserting into the one it switched from) and
    -- hold no row, unless already empty on disk.
    v_timeout := pg_catalog.current_setting('lock_timeout');
    FOREACH v_seg IN ARRAY v_was LOOP
        CONTINUE WHEN v_seg = v_cur
            OR pg_catalog.pg_relation_size(pg_catalog.format('backoff.jobs_live_%s', v_seg)::pg_catalog.regclass) = 0;
        -- "Empty" is decided by a snapshot taken after the lock, which only
        -- READ COMMITTED takes: under REPEATABLE READ or SERIALIZABLE the
        -- transaction's snapshot is older than the lock, and a job
        -- committed in between would be invisible to it, and truncated.
        IF pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
            note := pg_catalog.concat_ws('; ', note,
                pg_catalog.format('segment %s not truncated: rotate truncates only at READ COMMITTED, and this transaction is %s',
                                  v_seg, pg_catalog.upper(pg_catalog.current_setting('transaction_isolation'))));
            CONTINUE;
        END IF;
        BEGIN
            PERFORM pg_catalog.set_config('lock_timeout', '50ms', true);
            EXECUTE pg_catalog.format('LOCK TABLE backoff.%I IN ACCESS EXCLUSIVE MODE', 'jobs_live_' || v_seg);
            PERFORM pg_catalog.set_config('lock_timeout', v_timeout, true);
            -- Under the lock, with a new snapshot (READ COMMITTED, above):
            -- every writer that held the segment has ended, and what it
            -- committed is seen.
            IF EXISTS (SELECT FROM backoff.jobs AS j WHERE j.segment = v_seg) THEN
                note := pg_catalog.concat_ws('; ', note,
                    pg_catalog.format('segment %s not truncated: it still holds rows that others had locked', v_seg));
            ELSE
                EXECUTE pg_catalog.format('TRUNCATE backoff.%I', 'jobs_live_' || v_seg);
                truncated := truncated || v_seg;
            END IF;
        EXCEPTION WHEN lock_not_available THEN
            note := pg_catalog.concat_ws('; ', note,
                pg_catalog.format('segment %s not truncated: its lock was not granted within 50 ms (a transaction that read backoff.jobs holds it until it ends), nor tried are the segments left before it', v_seg));
            EXIT;
        END;
    END LOOP;
    IF cardinality(truncated) > 0 THEN
        PERFORM backoff._note_maintenance('truncate', NULL, p_now);
    END IF;
    RETURN NEXT;
END
$$;

COMMENT ON FUNCTION backoff.rotate(timestamptz, text) IS
'Maintain the live segments of backoff.jobs (docs/adr/0061); call it beside reap, e.g. once a second (the Go Worker does, as does the pg_cron schedule of backoffctl cron install). When the current segment has taken backoff.settings.segment_jobs jobs (5,000 by default) and at least as many as there are live jobs, the next segment that is empty on disk becomes current (switched_from names the old one); when none is, because a transaction that read backoff.jobs holds the others, a segment is added (up to 8 in all, docs/adr/0082) and note says so. Rows left in the other segments are moved, the live ones to the current segment and the finished ones to segment 0, skipping rows other transactions hold (moved counts them). A segment that was not current when the call began and holds no row is truncated (truncated lists them), under a lock_timeout of 50 ms and only at READ COMMITTED (a REPEATABLE READ or SERIALIZABLE snapshot is older than the lock and could miss a job committed meanwhile: there the call switches and moves, truncates nothing and says so in note; run it at READ COMMITTED, e.g. BEGIN ISOLATION LEVEL READ COMMITTED; SELECT backoff.rotate(); COMMIT, in a database whose default is another level); when the lock is not granted in time (a transaction that read backoff.jobs holds it until it ends), note says so, the segments left before it are not tried in that call, and the next call tries again. One call at a time: a call while another runs does nothing and says so. Each call is recorded for backoff.liveness (rotate_at, at most once every 15 seconds; truncate_at when it truncated), and p_worker (NULL: none), the caller''s worker name, counts that worker as seen (workers_seen): the Go, Python and TypeScript Workers pass theirs. Returns one row: current_segment, switched_from, moved, truncated, note.
Errors: 22023 for a p_worker that is not 1 to 128 bytes without control characters, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock.
Example:
SELECT current_segment, switched_from, moved, truncated, note FROM backoff.rotate();
SELECT moved FROM backoff.rotate(p_worker => ''worker-1'');';
