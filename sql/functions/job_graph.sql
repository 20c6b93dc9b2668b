-- backoff.job_graph(job id, limit): the workflow a job belongs to, as an
-- operator sees it (backoffctl jobs graph, the web UI's graph page): every
-- job reachable from it through dependencies, up to its parents and down to
-- its children, nearest first, with each job's edges to its parents and
-- those it still waits for (docs/adr/0087). Breadth first, one step of
-- probes per distance (the edges' primary key by child, their index by
-- parent), stopped at p_limit jobs: a graph's size is bounded by what
-- enqueue_graph takes at once, but graphs can be joined through existing
-- jobs without end (docs/adr/0090). No JIT, as for the other reads. Admin
-- only: it shows any queue's jobs (docs/adr/0072).
CREATE OR REPLACE FUNCTION backoff.job_graph(p_job_id bigint, p_limit integer DEFAULT 1000)
RETURNS TABLE (
    id              bigint,
    queue           text,
    status          text,
    distance        integer,
    parent_ids      bigint[],
    parent_policies text[],
    parent_states   text[],
    waiting_for     bigint[],
    truncated       boolean
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
SET jit = off
AS $$
DECLARE
    v_seen      bigint[];
    v_frontier  bigint[];
    v_previous  bigint[] := '{}';
    v_next      bigint[];
    v_distances integer[];
    v_distance  integer := 0;
    v_truncated boolean := false;
BEGIN
    IF p_limit IS NULL OR p_limit < 1 OR p_limit > 10000 THEN
        RAISE EXCEPTION 'graph of job %: limit of % jobs: want 1 to 10000', p_job_id, coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT FROM backoff.jobs AS j WHERE j.id = p_job_id) THEN
        RAISE EXCEPTION 'job "%" not found', coalesce(p_job_id::text, 'NULL')
            USING ERRCODE = 'BK001';
    END IF;
    v_seen := ARRAY[p_job_id];
    v_distances := ARRAY[0];
    v_frontier := ARRAY[p_job_id];
    WHILE pg_catalog.cardinality(v_frontier) > 0 LOOP
        v_distance := v_distance + 1;
        -- The neighbours of this step not seen yet, in id order, that
        -- still name a job (prune deletes a job with its edges). A
        -- neighbour of a job at distance d is at d - 1, d or d + 1: only
        -- the last two steps can hold it, not everything seen.
        SELECT coalesce(pg_catalog.array_agg(n.id ORDER BY n.id), '{}') INTO v_next
        FROM (
            SELECT d.parent_id AS id FROM backoff.job_dependencies AS d WHERE d.child_id = ANY (v_frontier)
            UNION
            SELECT d.child_id FROM backoff.job_dependencies AS d WHERE d.parent_id = ANY (v_frontier)
        ) AS n
        WHERE n.id <> ALL (v_frontier) AND n.id <> ALL (v_previous)
          AND EXISTS (SELECT FROM backoff.jobs AS j WHERE j.id = n.id);
        IF pg_catalog.cardinality(v_seen) + pg_catalog.cardinality(v_next) > p_limit THEN
            v_next := v_next[1:p_limit - pg_catalog.cardinality(v_seen)];
            v_truncated := true;
        END IF;
        v_seen := v_seen || v_next;
        v_distances := v_distances || pg_catalog.array_fill(v_distance, ARRAY[pg_catalog.cardinality(v_next)]);
        EXIT WHEN v_truncated;
        v_previous := v_frontier;
        v_frontier := v_next;
    END LOOP;
    RETURN QUERY
    SELECT j.id, j.queue, j.status, s.distance,
           coalesce(e.parent_ids, '{}'), coalesce(e.parent_policies, '{}'), coalesce(e.parent_states, '{}'),
           coalesce(e.waiting_for, '{}'), v_truncated
    FROM ROWS FROM (pg_catalog.unnest(v_seen), pg_catalog.unnest(v_distances)) AS s(id, distance)
    JOIN backoff.jobs AS j ON j.id = s.id
    LEFT JOIN LATERAL (
        SELECT pg_catalog.array_agg(d.parent_id ORDER BY d.parent_id) AS parent_ids,
               pg_catalog.array_agg(d.on_failure ORDER BY d.parent_id) AS parent_policies,
               pg_catalog.array_agg(d.state ORDER BY d.parent_id) AS parent_states,
               pg_catalog.array_agg(d.parent_id ORDER BY d.parent_id)
                   FILTER (WHERE d.state IN ('open', 'waiting') AND j.status = 'blocked') AS waiting_for
        FROM backoff.job_dependencies AS d
        WHERE d.child_id = j.id
    ) AS e ON true
    ORDER BY s.distance, j.id;
END
$$;

COMMENT ON FUNCTION backoff.job_graph(bigint, integer) IS
'The workflow job p_job_id belongs to: the job and every job reachable from it through dependencies, its parents and their parents, its children and theirs, and so on both ways, one row each, nearest first (distance: the fewest edges from p_job_id, 0 for itself), then by id. At most p_limit jobs (default 1000, at most 10000): when the graph has more, the rows are the p_limit nearest and truncated is true on each. Each row: id, queue, status; parent_ids: the jobs it depends on, in id order, with each edge''s on_failure in parent_policies and its state in parent_states (open: the parent has not finished; satisfied; failed: the policy was applied; waiting: the parent failed under a ''wait'' edge and the job waits for backoff.unblock or a replay; released: by backoff.unblock); waiting_for: for a blocked job, the parents whose edge is open or waiting, the ones it still waits for (empty for a job in any other status: a job cancelled by one parent keeps its other edges open). A parent that prune deleted is listed in parent_ids but has no row. Admin only.
Errors: BK001 no such job; 22023 a p_limit that is NULL, below 1 or above 10000.
Example:
SELECT * FROM backoff.enqueue_graph(''[{"ref": "a", "queue": "etl"}, {"ref": "b", "queue": "etl"}, {"ref": "c", "queue": "etl", "depends_on": ["a", {"ref": "b", "on_failure": "run"}]}]'');
SELECT id FROM backoff.claim(''etl'', ''worker-1'');
SELECT status FROM backoff.complete(1, 1);
SELECT id, status, distance, parent_ids, parent_policies, parent_states, waiting_for FROM backoff.job_graph(3);';
