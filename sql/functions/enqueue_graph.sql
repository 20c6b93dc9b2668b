-- backoff.enqueue_graph(jobs, now): enqueue a workflow, jobs that depend on
-- one another, in one call and one transaction (docs/adr/0087). Each
-- element of p_jobs is a job as backoff.enqueue takes it, with a local
-- "ref" and "depends_on": refs of the graph, or ids of existing jobs, each
-- with the edge's policy for a parent that ends without completing. The
-- graph is checked whole before anything is inserted (unknown keys and
-- references, self-edges, duplicate edges, cycles), then every job goes
-- through backoff.enqueue, so that names, limits, policies, dedupe keys,
-- queue scopes and wake-ups are exactly those of a single enqueue; the
-- jobs with an unfinished parent are then 'blocked', outside the claim
-- index, with a counter of their open edges.
CREATE OR REPLACE FUNCTION backoff.enqueue_graph(
    p_jobs jsonb,
    p_now  timestamptz DEFAULT now()
)
RETURNS TABLE (ref text, job_id bigint)
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_n        integer;
    v_refs     text[];
    v_ids      bigint[];
    v_new      boolean[];
    v_bad      text;
    v_out      integer[];
    v_outs     integer[];
    v_first    integer[];
    v_indeg    integer[];
    v_taken    integer[];
    v_next     integer;
    v_job      integer;
    v_scope    text[];
    v_tries    integer := 0;
    v_missing  bigint[];
    v_cancel   bigint[];
    v_cause    bigint[];
    v_why      text[];
    v_blocked  bigint[];
    e          jsonb;
    -- The edges: child and parent places in the graph, or the parent's id,
    -- and the policy; the existing parents' ids and statuses.
    v_ec       integer[];
    v_ep       integer[];
    v_eid      bigint[];
    v_epol     text[];
    v_pid      bigint[] := '{}';
    v_pstatus  text[]   := '{}';
    v_all      bigint[];
BEGIN
    p_now := backoff._now(p_now);
    IF p_jobs IS NULL OR pg_catalog.jsonb_typeof(p_jobs) <> 'array' OR pg_catalog.jsonb_array_length(p_jobs) = 0 THEN
        RAISE EXCEPTION 'enqueue_graph: jobs must be a non-empty JSON array, got "%"', coalesce(pg_catalog.left(p_jobs::text, 100), 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_n := pg_catalog.jsonb_array_length(p_jobs);
    -- Bounded input (docs/adr/0039): a graph is one transaction's work.
    IF v_n > 10000 THEN
        RAISE EXCEPTION 'enqueue_graph: at most 10000 jobs in one graph, got "%"', v_n
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The shape of each job, and of each of its edges.
    FOR i IN 0..v_n - 1 LOOP
        e := p_jobs -> i;
        IF pg_catalog.jsonb_typeof(e) <> 'object' THEN
            RAISE EXCEPTION 'enqueue_graph: job % must be a JSON object, got "%"', i + 1, pg_catalog.left(e::text, 100)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_bad := (SELECT k FROM pg_catalog.jsonb_object_keys(e) AS k
                  WHERE k NOT IN ('ref', 'queue', 'payload', 'run_at', 'max_attempts', 'priority', 'dedupe_key', 'policy', 'depends_on')
                  LIMIT 1);
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'enqueue_graph: job % has an unknown key "%"', i + 1, v_bad
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'keys: ref, queue, payload, run_at, max_attempts, priority, dedupe_key, policy, depends_on';
        END IF;
        IF pg_catalog.jsonb_typeof(e -> 'ref') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'enqueue_graph: job % needs a "ref" string, got "%"', i + 1, coalesce((e -> 'ref')::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        PERFORM backoff._check_name('ref', e ->> 'ref');
        IF e ? 'depends_on' AND pg_catalog.jsonb_typeof(e -> 'depends_on') NOT IN ('array', 'null') THEN
            RAISE EXCEPTION 'enqueue_graph: depends_on of "%" must be an array, got "%"', e ->> 'ref', pg_catalog.left((e -> 'depends_on')::text, 100)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END LOOP;
    v_refs := ARRAY(SELECT t.j ->> 'ref' FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS t(j, ord) ORDER BY t.ord);
    v_bad := (SELECT r FROM unnest(v_refs) AS r GROUP BY r HAVING count(*) > 1 LIMIT 1);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'enqueue_graph: ref "%" names more than one job', v_bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A queue moving away from this shard takes no graph here
    -- (docs/adr/0092): through the router, it goes to the new shard.
    IF EXISTS (SELECT FROM backoff.queue_moves AS m WHERE m.direction = 'out') THEN
        v_bad := (SELECT t.j ->> 'queue' FROM pg_catalog.jsonb_array_elements(p_jobs) AS t(j)
                  WHERE backoff._moved_away(t.j ->> 'queue') IS NOT NULL LIMIT 1);
        IF v_bad IS NOT NULL THEN
            RAISE EXCEPTION 'enqueue_graph: queue "%" moves to shard %', v_bad, backoff._moved_away(v_bad)
                USING ERRCODE = 'object_in_use',
                      HINT = 'Enqueue again: through the router it goes to the queue''s new shard (docs/sharding.md, moving a queue).';
        END IF;
    END IF;

    -- The edges, one row each: the child's place, its parent's place in the
    -- graph or an existing job's id, and the policy.
    -- (Arrays, not a temporary table: the function needs no TEMP
    -- privilege and leaves no catalog rows behind.)
    SELECT coalesce(array_agg(x.child ORDER BY x.child, x.n), '{}'), coalesce(array_agg(x.parent ORDER BY x.child, x.n), '{}'),
           coalesce(array_agg(x.parent_id ORDER BY x.child, x.n), '{}'), coalesce(array_agg(x.on_failure ORDER BY x.child, x.n), '{}')
    INTO v_ec, v_ep, v_eid, v_epol
    FROM (
    SELECT j.ord::integer AS child, d.n,
           CASE WHEN pg_catalog.jsonb_typeof(d.v) = 'string' THEN pg_catalog.array_position(v_refs, d.v #>> '{}')
                WHEN d.v ? 'ref' THEN pg_catalog.array_position(v_refs, d.v ->> 'ref') END AS parent,
           CASE WHEN pg_catalog.jsonb_typeof(d.v) = 'number' THEN (d.v #>> '{}')::bigint
                WHEN d.v ? 'job' THEN (d.v ->> 'job')::bigint END AS parent_id,
           coalesce(CASE WHEN pg_catalog.jsonb_typeof(d.v) = 'object' THEN d.v ->> 'on_failure' END, 'cancel') AS on_failure
    FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS j(j, ord)
    CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(coalesce(nullif(j.j -> 'depends_on', 'null'), '[]')) WITH ORDINALITY AS d(v, n)
    ) AS x;
    -- An edge that names no job of the graph and no id, or a policy that
    -- does not exist, named with its child.
    SELECT pg_catalog.format('depends_on of "%s" names %s', v_refs[g.child],
                             CASE WHEN g.on_failure NOT IN ('cancel', 'run', 'wait')
                                  THEN pg_catalog.format('an unknown on_failure "%s" (cancel, run or wait)', g.on_failure)
                                  ELSE 'an unknown ref' END)
    INTO v_bad
    FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
    WHERE (g.parent IS NULL AND g.parent_id IS NULL) OR g.on_failure NOT IN ('cancel', 'run', 'wait')
    ORDER BY g.child
    LIMIT 1;
    IF v_bad LIKE '%an unknown ref' THEN
        -- Name the reference itself when it is one.
        v_bad := coalesce((
        SELECT pg_catalog.format('depends_on of "%s" names an unknown ref "%s"', v_refs[j.ord], coalesce(d.v ->> 'ref', d.v #>> '{}'))
        FROM pg_catalog.jsonb_array_elements(p_jobs) WITH ORDINALITY AS j(j, ord)
        CROSS JOIN LATERAL pg_catalog.jsonb_array_elements(coalesce(nullif(j.j -> 'depends_on', 'null'), '[]')) AS d(v)
        WHERE (pg_catalog.jsonb_typeof(d.v) = 'string' AND NOT (d.v #>> '{}') = ANY (v_refs))
           OR (pg_catalog.jsonb_typeof(d.v) = 'object' AND d.v ? 'ref' AND NOT (d.v ->> 'ref') = ANY (v_refs))
        ORDER BY j.ord
        LIMIT 1), pg_catalog.format('%s without a ref or a job id', v_bad));
    END IF;
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'enqueue_graph: %', coalesce(v_bad, (SELECT pg_catalog.format('depends_on of "%s" has an edge without a ref or a job id, or with an unknown on_failure', v_refs[g.child])
                                                            FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
                                                            WHERE (g.parent IS NULL AND g.parent_id IS NULL) OR g.on_failure NOT IN ('cancel', 'run', 'wait')
                                                            ORDER BY g.child LIMIT 1))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_bad := (SELECT v_refs[g.child] FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure) WHERE g.parent = g.child ORDER BY g.child LIMIT 1);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'enqueue_graph: job "%" depends on itself', v_bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_bad := (SELECT pg_catalog.format('"%s" on "%s"', v_refs[g.child], coalesce(v_refs[g.parent], g.parent_id::text))
              FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
              GROUP BY g.child, g.parent, g.parent_id HAVING count(*) > 1 LIMIT 1);
    IF v_bad IS NOT NULL THEN
        RAISE EXCEPTION 'enqueue_graph: the dependency % is given twice', v_bad
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- Cycles: Kahn's order over the edges within the graph, in O(jobs +
    -- edges) steps on arrays (peeling the graph round by round was a
    -- statement a round, as many rounds as the graph is deep: minutes for a
    -- chain of 10,000): a job is taken once every parent of it in the graph
    -- has been; a job never taken is on a cycle or after one.
    SELECT coalesce(array_agg(g.child ORDER BY g.parent), '{}') INTO v_out
    FROM unnest(v_ec, v_ep) AS g(child, parent)
    WHERE g.parent IS NOT NULL;
    SELECT array_agg(coalesce(o.n, 0) ORDER BY k.k), array_agg(coalesce(o.first, 0) ORDER BY k.k),
           array_agg(coalesce(i.n, 0) ORDER BY k.k)
    INTO v_outs, v_first, v_indeg
    FROM pg_catalog.generate_series(1, v_n) AS k(k)
    LEFT JOIN (SELECT g.parent, count(*)::integer AS n,
                      (sum(count(*)) OVER (ORDER BY g.parent) - count(*) + 1)::integer AS first
               FROM unnest(v_ep) AS g(parent) WHERE g.parent IS NOT NULL GROUP BY g.parent) AS o ON o.parent = k.k
    LEFT JOIN (SELECT g.child, count(*)::integer AS n
               FROM unnest(v_ec, v_ep) AS g(child, parent) WHERE g.parent IS NOT NULL GROUP BY g.child) AS i ON i.child = k.k;
    v_taken := ARRAY(SELECT k FROM pg_catalog.generate_series(1, v_n) AS k WHERE v_indeg[k] = 0);
    v_next := 1;
    WHILE v_next <= cardinality(v_taken) LOOP
        v_job := v_taken[v_next];
        v_next := v_next + 1;
        FOR k IN v_first[v_job] .. v_first[v_job] + v_outs[v_job] - 1 LOOP
            v_indeg[v_out[k]] := v_indeg[v_out[k]] - 1;
            IF v_indeg[v_out[k]] = 0 THEN
                v_taken := v_taken || v_out[k];
            END IF;
        END LOOP;
    END LOOP;
    IF cardinality(v_taken) < v_n THEN
        RAISE EXCEPTION 'enqueue_graph: the dependencies have a cycle through %',
            (SELECT pg_catalog.string_agg(pg_catalog.format('"%s"', v_refs[l.o]), ', ' ORDER BY l.o)
             FROM (SELECT o FROM pg_catalog.generate_series(1, v_n) AS o WHERE v_indeg[o] > 0 ORDER BY o LIMIT 10) AS l(o))
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    v_ids := '{}';
    v_new := '{}';
    FOR i IN 0..v_n - 1 LOOP
        e := p_jobs -> i;
        v_ids := v_ids || backoff.enqueue(
            e ->> 'queue', nullif(e -> 'payload', 'null'), (e ->> 'run_at')::timestamptz, (e ->> 'max_attempts')::integer,
            coalesce((e ->> 'priority')::integer, 0), e ->> 'dedupe_key', p_now, e ->> 'policy');
        v_new := v_new || (v_ids[i + 1] = pg_catalog.currval('backoff.jobs_id_seq'::pg_catalog.regclass));
    END LOOP;
    -- A deduplicated job's edges go, and an edge to one names its id.
    SELECT coalesce(array_agg(g.child), '{}'), coalesce(array_agg(g.parent), '{}'),
           coalesce(array_agg(coalesce(g.parent_id, CASE WHEN NOT v_new[g.parent] THEN v_ids[g.parent] END)), '{}'),
           coalesce(array_agg(g.on_failure), '{}')
    INTO v_ec, v_ep, v_eid, v_epol
    FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
    WHERE v_new[g.child];
    -- Parents that exist already (an id, or a deduplicated job of the
    -- graph): their status says what the edge is now. None may finish
    -- unseen before these edges commit, or its settlement would miss them:
    -- a live parent's row is updated (a column nothing indexes, so the
    -- update stays off the indexes), which a finishing call waits for and
    -- then, at READ COMMITTED, settles with a snapshot that sees the edges,
    -- or, at REPEATABLE READ and SERIALIZABLE, fails with a serialization
    -- error and retries; a lock alone would let that snapshot miss them. A
    -- finished parent is locked FOR KEY SHARE against prune. A row that a
    -- call finished or rotate moved while this waited is read again.
    v_scope := backoff._queue_scope('produce');
    IF NOT backoff._scope_in_force() THEN
        v_scope := NULL;
    END IF;
    LOOP
        v_tries := v_tries + 1;
        v_all := ARRAY(SELECT DISTINCT g.parent_id FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
                       WHERE g.parent_id IS NOT NULL ORDER BY 1);
        WITH u AS (
            UPDATE backoff.jobs AS j SET locked_by = j.locked_by
            WHERE j.id = ANY (v_all)
              AND j.status IN ('pending', 'running', 'retrying', 'blocked')
              AND (v_scope IS NULL OR j.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
            RETURNING j.id, j.status
        )
        SELECT coalesce(array_agg(u.id), '{}'), coalesce(array_agg(u.status), '{}') INTO v_pid, v_pstatus FROM u;
        SELECT v_pid || coalesce(array_agg(l.id), '{}'), v_pstatus || coalesce(array_agg(l.status), '{}') INTO v_pid, v_pstatus
        FROM (SELECT j.id, j.status FROM backoff.jobs AS j
              WHERE j.id = ANY (v_all)
                AND NOT j.id = ANY (v_pid)
                AND j.status IN ('completed', 'dead_lettered', 'cancelled')
                AND (v_scope IS NULL OR j.queue OPERATOR(pg_catalog.~~) ANY (v_scope))
              ORDER BY j.id
              FOR KEY SHARE OF j) AS l;
        v_missing := ARRAY(SELECT DISTINCT g.parent_id FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
                           WHERE g.parent_id IS NOT NULL
                             AND NOT EXISTS (SELECT FROM unnest(v_pid, v_pstatus) AS p(id, status) WHERE p.id = g.parent_id)
                           ORDER BY 1);
        EXIT WHEN cardinality(v_missing) = 0 OR v_tries = 3;
    END LOOP;
    IF cardinality(v_missing) > 0 THEN
        RAISE EXCEPTION 'enqueue_graph: depends_on of "%" names job "%", which does not exist',
            (SELECT v_refs[g.child] FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure) WHERE g.parent_id = v_missing[1] ORDER BY g.child LIMIT 1),
            v_missing[1]
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The edges and the counters. An edge to a completed parent is
    -- satisfied now; to one that failed, its policy applies now.
    INSERT INTO backoff.job_dependencies (child_id, parent_id, on_failure, state)
    SELECT v_ids[g.child], coalesce(g.parent_id, v_ids[g.parent]), g.on_failure,
           CASE WHEN p.status IS NULL OR p.status NOT IN ('completed', 'dead_lettered', 'cancelled') THEN 'open'
                WHEN p.status = 'completed' OR g.on_failure = 'run' THEN 'satisfied'
                WHEN g.on_failure = 'wait' THEN 'waiting'
                ELSE 'failed' END
    FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)
    LEFT JOIN unnest(v_pid, v_pstatus) AS p(id, status) ON p.id = g.parent_id;
    WITH c AS (
        SELECT d.child_id,
               count(*) FILTER (WHERE d.state = 'open') AS open,
               count(*) FILTER (WHERE d.state = 'waiting') AS waiting,
               count(*) FILTER (WHERE d.state = 'failed') AS failed
        FROM backoff.job_dependencies AS d
        WHERE d.child_id = ANY (ARRAY(SELECT DISTINCT v_ids[g.child] FROM unnest(v_ec, v_ep, v_eid, v_epol) AS g(child, parent, parent_id, on_failure)))
        GROUP BY d.child_id
    ), b AS (
        INSERT INTO backoff.job_blockers AS k (job_id, remaining, waiting)
        SELECT c.child_id, c.open, c.waiting FROM c WHERE c.open + c.waiting + c.failed > 0
        RETURNING k.job_id
    )
    SELECT array_agg(b.job_id) INTO v_blocked FROM b;
    IF v_blocked IS NOT NULL THEN
        UPDATE backoff.jobs AS j SET status = 'blocked'
        WHERE j.id = ANY (v_blocked) AND j.status = 'pending';
    END IF;
    -- A child of a parent that failed already, under 'cancel', is
    -- cancelled now, and its children in the graph with it.
    SELECT array_agg(d.child_id ORDER BY d.child_id), array_agg(d.parent_id ORDER BY d.child_id),
           array_agg(p.status ORDER BY d.child_id)
    INTO v_cancel, v_cause, v_why
    FROM (SELECT DISTINCT ON (d.child_id) d.child_id, d.parent_id
          FROM backoff.job_dependencies AS d
          WHERE d.child_id = ANY (v_blocked) AND d.state = 'failed'
          ORDER BY d.child_id, d.parent_id) AS d
    JOIN unnest(v_pid, v_pstatus) AS p(id, status) ON p.id = d.parent_id;
    IF v_cancel IS NOT NULL THEN
        FOR i IN 1..cardinality(v_cancel) LOOP
            IF EXISTS (SELECT FROM backoff.jobs AS j WHERE j.id = v_cancel[i] AND j.status = 'blocked') THEN
                PERFORM backoff.cancel(v_cancel[i], pg_catalog.format('parent job "%s" was %s', v_cause[i], v_why[i]), p_now);
            END IF;
        END LOOP;
    END IF;

    RETURN QUERY SELECT t.r, t.id FROM unnest(v_refs, v_ids) AS t(r, id);
END
$$;

COMMENT ON FUNCTION backoff.enqueue_graph(jsonb, timestamptz) IS
'Enqueue a workflow in one call and one transaction, and return each job''s ref and id, in input order. p_jobs is a JSON array of jobs, each an object with "ref" (a name for the job within this graph, 1 to 128 bytes, unique), "queue", and optionally "payload", "run_at", "max_attempts", "priority", "dedupe_key", "policy" (as backoff.enqueue takes them; any queue of the caller''s) and "depends_on": an array of parents, each a ref of this graph ("extract"), an existing job''s id (42), or an object {"ref": "extract"} or {"job": 42} with "on_failure": ''cancel'' (the default), ''run'' or ''wait''. A job with a parent that has not completed is blocked: never claimed, until its last parent completes, in that parent''s transaction. A parent that ends without completing (dead_lettered, cancelled) applies each edge''s on_failure: ''cancel'' cancels the child (its last_error names the parent) and, in turn, the child''s own ''cancel'' children; ''run'' counts the edge as satisfied; ''wait'' keeps the child blocked until backoff.unblock, or a replay of the parent (then the child waits for the new run). An edge to a job that has completed is satisfied already, one to a job that failed applies its policy now. A job whose dedupe key an unfinished job holds is that job, unchanged (its depends_on is not applied). Each job is enqueued as backoff.enqueue would (limits, policies, scopes, wake-ups); atomic: on error nothing is added.
Errors: 55006 when one of its queues moves away from this shard (backoffctl shards move, docs/adr/0092); 22023 for p_jobs that is not a non-empty array of objects, more than 10000 jobs, an unknown key, a missing, invalid or repeated ref, a depends_on that is not an array, an unknown ref or on_failure (naming them), a job that depends on itself, an edge given twice, a cycle (naming the refs on or after it), a job id that does not exist (or, for a scoped caller, whose queue it may not produce into), and every error of backoff.enqueue for a job''s fields; a field of the wrong JSON type raises its cast''s error (22P02, 22007). 42501 when the caller is scoped and may not produce into a job''s queue.
Example:
SELECT * FROM backoff.enqueue_graph(''[
  {"ref": "extract", "queue": "etl", "payload": {"table": "orders"}},
  {"ref": "load-eu", "queue": "etl", "depends_on": ["extract"]},
  {"ref": "load-us", "queue": "etl", "depends_on": ["extract"]},
  {"ref": "report", "queue": "reports", "depends_on": ["load-eu", {"ref": "load-us", "on_failure": "run"}]}
]'');
SELECT id, status FROM backoff.jobs ORDER BY id;';
