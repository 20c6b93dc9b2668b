-- backoff._reopen_dependents(parent ids): parents that ended without
-- completing are replayed; the 'wait' edges they left waiting open again,
-- so the children wait for the replayed run instead of an operator
-- (docs/adr/0087). The children's counters are locked in id order, as
-- backoff._settle_dependents locks them. Edges already satisfied ('run'),
-- failed (the child was cancelled) or released stay as they are. Called by
-- replay and replay_dead_letters only when such an edge exists. Private.
CREATE OR REPLACE FUNCTION backoff._reopen_dependents(p_parent_ids bigint[])
RETURNS void
LANGUAGE plpgsql
VOLATILE
AS $$
BEGIN
    PERFORM FROM backoff.job_blockers AS b
    WHERE b.job_id = ANY (ARRAY(SELECT d.child_id FROM backoff.job_dependencies AS d
                                WHERE d.parent_id = ANY (p_parent_ids) AND d.state = 'waiting'))
    ORDER BY b.job_id
    FOR UPDATE;
    WITH e AS (
        UPDATE backoff.job_dependencies AS d
        SET state = 'open'
        WHERE d.parent_id = ANY (p_parent_ids)
          AND d.state = 'waiting'
        RETURNING d.child_id
    ), c AS (
        SELECT e.child_id, count(*) AS n FROM e GROUP BY e.child_id
    )
    UPDATE backoff.job_blockers AS b
    SET remaining = b.remaining + c.n,
        waiting = b.waiting - c.n
    FROM c
    WHERE b.job_id = c.child_id;
END
$$;
