-- backoff._settle_dependents(parent ids, outcome, now): a parent finished
-- (p_outcome 'completed', 'dead_lettered' or 'cancelled'); settle its open
-- edges (backoff.job_dependencies) and what they block. Called in the
-- transaction that finishes the parents, by complete, complete_many,
-- fail, reap and cancel, only when backoff.job_dependencies names one of
-- them (a probe, so that jobs without dependents pay one index look-up).
--
-- Each child's counter (backoff.job_blockers) is decremented under its
-- row lock: of two last parents settling at once in READ COMMITTED, the
-- second waits for the first's lock and then re-reads the row, sees
-- remaining = 1 and takes it to 0, so one of them always unblocks the
-- child; at REPEATABLE READ or SERIALIZABLE the second gets a
-- serialization failure (40001) and its retry settles it. The last parent
-- decrements one row, whatever the fan-in (docs/adr/0087).
--
-- A completed parent satisfies the edge. One that ended otherwise applies
-- the edge's policy: 'run' satisfies it, 'wait' keeps the child blocked
-- (waiting, until backoff.unblock or a replay of the parent), 'cancel'
-- cancels the child, naming the parent, and the cancel settles the
-- child's own children in turn. A child with nothing left open and
-- nothing waiting becomes pending, moved into the current segment so that
-- the next claim sees it, and a worker waiting for its queue is woken.
-- Private.
CREATE OR REPLACE FUNCTION backoff._settle_dependents(
    p_parent_ids bigint[],
    p_outcome    text,
    p_now        timestamptz
)
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
DECLARE
    v_ready     bigint[];
    v_failed    bigint[];
    v_failed_by bigint[];
    v_queues    text[];
    v_children  bigint[];
BEGIN
    -- The children's counters, locked in id order: two settlements that
    -- share children take their locks in the same order and cannot
    -- deadlock on them. The statements below find the counters by these
    -- ids: joined to the counts alone, a generic plan may walk the whole
    -- primary key, and with it every dead row a held snapshot keeps.
    v_children := ARRAY(
        SELECT b.job_id FROM backoff.job_blockers AS b
        WHERE b.job_id = ANY (ARRAY(SELECT d.child_id FROM backoff.job_dependencies AS d
                                    WHERE d.parent_id = ANY (p_parent_ids) AND d.state = 'open'))
        ORDER BY b.job_id
        FOR UPDATE);
    WITH e AS (
        UPDATE backoff.job_dependencies AS d
        SET state = CASE WHEN p_outcome = 'completed' OR d.on_failure = 'run' THEN 'satisfied'
                         WHEN d.on_failure = 'wait' THEN 'waiting'
                         ELSE 'failed' END
        WHERE d.parent_id = ANY (p_parent_ids)
          AND d.state = 'open'
        RETURNING d.child_id, d.parent_id, d.state
    ), c AS (
        SELECT e.child_id,
               count(*) AS n,
               count(*) FILTER (WHERE e.state = 'waiting') AS w,
               min(e.parent_id) FILTER (WHERE e.state = 'failed') AS failed_by
        FROM e
        GROUP BY e.child_id
    ), r AS (
        -- A child this settles the last open edge of, with none waiting and
        -- none failed: its counter goes (one write, not a decrement and a
        -- delete), and it is released below.
        DELETE FROM backoff.job_blockers AS b
        USING c
        WHERE b.job_id = ANY (v_children)
          AND b.job_id = c.child_id
          AND c.failed_by IS NULL AND b.remaining = c.n AND b.waiting + c.w = 0
        RETURNING b.job_id
    ), b AS (
        UPDATE backoff.job_blockers AS b
        SET remaining = b.remaining - c.n,
            waiting = b.waiting + c.w
        FROM c
        WHERE b.job_id = ANY (v_children)
          AND b.job_id = c.child_id
          AND NOT (c.failed_by IS NULL AND b.remaining = c.n AND b.waiting + c.w = 0)
        RETURNING b.job_id, c.failed_by
    )
    SELECT (SELECT array_agg(r.job_id) FROM r),
           array_agg(b.job_id ORDER BY b.job_id) FILTER (WHERE b.failed_by IS NOT NULL),
           array_agg(b.failed_by ORDER BY b.job_id) FILTER (WHERE b.failed_by IS NOT NULL)
    INTO v_ready, v_failed, v_failed_by
    FROM b;

    IF v_ready IS NOT NULL THEN
        PERFORM backoff._release_blocked(v_ready, p_now);
    END IF;

    -- 'cancel' edges: the child is cancelled (it holds no lock of ours
    -- but its counter), which settles its own children in turn.
    IF v_failed IS NOT NULL THEN
        DELETE FROM backoff.job_blockers AS b WHERE b.job_id = ANY (v_failed);
        FOR i IN 1..cardinality(v_failed) LOOP
            IF EXISTS (SELECT FROM backoff.jobs AS j WHERE j.id = v_failed[i] AND j.status = 'blocked') THEN
                PERFORM backoff.cancel(v_failed[i],
                                       pg_catalog.format('parent job "%s" was %s', v_failed_by[i], p_outcome),
                                       p_now);
            END IF;
        END LOOP;
    END IF;
END
$$;
