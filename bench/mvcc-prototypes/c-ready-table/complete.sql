-- c.complete_many(ids, attempts): backoff.complete_many's statement, fenced
-- on (id, attempts): the row stays, now completed, until a prune deletes it.
CREATE FUNCTION c.complete_many(p_ids bigint[], p_attempts integer[], p_now timestamptz DEFAULT now())
RETURNS integer
LANGUAGE plpgsql VOLATILE
SET enable_seqscan = off
SET enable_nestloop = off
SET jit = off
AS $$
DECLARE
    v_n integer;
BEGIN
    UPDATE c.jobs AS j
    SET status = 'completed', completed_at = p_now, lease_until = NULL, locked_by = NULL
    FROM unnest(p_ids, p_attempts) AS t(id, attempt)
    WHERE j.id = ANY (p_ids) AND j.id = t.id AND j.attempts = t.attempt AND j.status = 'running';
    GET DIAGNOSTICS v_n = ROW_COUNT;
    RETURN v_n;
END
$$;
