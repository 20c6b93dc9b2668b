-- backoff.enqueue(queue, payload, run_at, max_attempts, priority, dedupe_key,
-- now, policy): insert a job and return its id. The job records p_policy,
-- else the policy of its queue at this moment
-- (docs/adr/0008-single-retry-decision.md). p_policy follows p_now, against
-- the p_now-last convention, so that positional calls written before it
-- existed keep their meaning (docs/design.md#functions: optional parameters at the end). A dedupe
-- key that matches an unfinished job of the same queue returns that job's
-- id and inserts nothing. A job due now wakes listeners of channel
-- 'backoff_jobs' (payload: the queue name) when a worker has registered
-- that it waits for the queue (backoff.wait_for_jobs); a busy system, whose
-- workers do not wait, takes no notify lock. PostgreSQL delivers identical
-- notifications of one transaction once, so a bulk enqueue sends one per
-- queue.
CREATE OR REPLACE FUNCTION backoff.enqueue(
    p_queue        text,
    p_payload      jsonb DEFAULT '{}',
    p_run_at       timestamptz DEFAULT NULL,
    p_max_attempts integer DEFAULT NULL,
    p_priority     integer DEFAULT 0,
    p_dedupe_key   text DEFAULT NULL,
    p_now          timestamptz DEFAULT now(),
    p_policy       text DEFAULT NULL
)
RETURNS bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_id      bigint;
    v_run_at  timestamptz;
    v_scoped  boolean;
    v_waiting boolean;
    v_held    bigint;
BEGIN
    p_now := backoff._now(p_now);
    v_run_at := coalesce(p_run_at, p_now);
    p_queue := backoff._check_name('queue', p_queue);
    IF p_max_attempts < 1 THEN
        RAISE EXCEPTION 'max_attempts must be at least 1, got "%"', p_max_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A bounded range (docs/adr/0059): room for any ordering an
    -- application needs, and no extreme a producer could use to stay
    -- ahead of every priority an operator may later give.
    IF p_priority NOT BETWEEN -32768 AND 32767 THEN
        RAISE EXCEPTION 'priority must be between -32768 and 32767, got "%"', p_priority
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_run_at < '0001-01-01 00:00:00+00' OR p_run_at >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'run_at must be a finite time in years 1 to 9999, got "%"', p_run_at
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The payload's size (docs/adr/0059): the limit is read only for a
    -- payload over 1 KiB, the smallest limit the setting allows, or one
    -- that arrives compressed (read from a table); otherwise two calls and
    -- no query.
    IF pg_catalog.pg_column_size(p_payload) > 1024 OR pg_catalog.pg_column_compression(p_payload) IS NOT NULL THEN
        PERFORM backoff._check_payload(ARRAY[p_payload]);
    END IF;
    IF p_dedupe_key = '' THEN
        RAISE EXCEPTION 'dedupe key must be NULL or non-empty, got ""'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_dedupe_key IS NOT NULL THEN
        p_dedupe_key := backoff._check_name('dedupe key', p_dedupe_key);
    END IF;
    IF p_policy IS NOT NULL THEN
        p_policy := backoff._check_name('policy', p_policy);
        IF NOT EXISTS (SELECT 1 FROM backoff.policies AS p WHERE p.name = p_policy) THEN
            RAISE EXCEPTION 'unknown policy "%"', p_policy
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    -- A queue moving away from this shard (docs/adr/0092): the marks are
    -- read only on a shard that has one (backoff._moves_out).
    IF backoff._moves_out() THEN
        IF EXISTS (SELECT FROM backoff.queue_moves AS m WHERE m.queue = p_queue AND m.direction = 'out') THEN
            RAISE EXCEPTION 'enqueue in queue "%": the queue moves to shard %', p_queue, backoff._moved_away(p_queue)
                USING ERRCODE = 'object_in_use',
                      HINT = 'Enqueue again: through the router it goes to the queue''s new shard (docs/sharding.md, moving a queue).';
        END IF;
    END IF;
    IF p_dedupe_key IS NULL THEN
        -- The common case in one statement (one executor start, profile in
        -- docs/benchmarks.md): the job, and two probes in its RETURNING: is
        -- any caller scoped by queue, and does a worker wait for this
        -- queue (then a job due now notifies it at commit, docs/adr/0027).
        -- Into the current segment (docs/adr/0061).
        INSERT INTO backoff.jobs (queue, payload, priority, max_attempts, policy, run_at, created_at, segment)
        SELECT p_queue, coalesce(p_payload, '{}'), coalesce(p_priority, 0), p_max_attempts, g.name, v_run_at, p_now,
               backoff._current_segment()
        FROM backoff._governing_policy(p_policy, p_queue) AS g
        RETURNING id,
                  backoff._scope_in_force(),
                  EXISTS (SELECT FROM backoff.waiting_workers AS w
                          WHERE w.queue = p_queue AND w.expires_at > pg_catalog.now())
        INTO v_id, v_scoped, v_waiting;
        IF v_scoped THEN
            -- 42501 for a caller that may not produce into p_queue: the
            -- error undoes the INSERT.
            PERFORM backoff._check_queue(ARRAY[p_queue], 'produce');
        END IF;
        IF v_waiting AND v_run_at <= p_now THEN
            PERFORM pg_catalog.pg_notify('backoff_jobs', p_queue);
        END IF;
        RETURN v_id;
    END IF;

    -- With a dedupe key the grants are checked first: a caller that may not
    -- produce into p_queue must not learn the id of its job with that key.
    SELECT backoff._scope_in_force(),
           v_run_at <= p_now AND EXISTS (SELECT FROM backoff.waiting_workers AS w
                                         WHERE w.queue = p_queue AND w.expires_at > pg_catalog.now())
    INTO v_scoped, v_waiting;
    IF v_scoped THEN
        PERFORM backoff._check_queue(ARRAY[p_queue], 'produce');
    END IF;
    -- The key is held in backoff.dedupe_keys (docs/adr/0061): take it for
    -- a new id, or return the unfinished job that holds it. The id is drawn
    -- either way, as the INSERT ... ON CONFLICT of one table did, so that
    -- ids follow as they always have.
    v_id := pg_catalog.nextval('backoff.jobs_id_seq'::pg_catalog.regclass);
    v_held := (SELECT k.held FROM backoff._take_dedupe_key(p_queue, p_dedupe_key, v_id) AS k);
    IF v_held IS NOT NULL THEN
        RETURN v_held;
    END IF;
    INSERT INTO backoff.jobs (id, queue, payload, priority, max_attempts, policy, run_at, created_at, dedupe_key, segment)
    OVERRIDING SYSTEM VALUE
    SELECT v_id, p_queue, coalesce(p_payload, '{}'), coalesce(p_priority, 0), p_max_attempts, g.name, v_run_at, p_now,
           p_dedupe_key, backoff._current_segment()
    FROM backoff._governing_policy(p_policy, p_queue) AS g;
    IF v_waiting THEN
        PERFORM pg_catalog.pg_notify('backoff_jobs', p_queue);
    END IF;
    RETURN v_id;
END
$$;

COMMENT ON FUNCTION backoff.enqueue(text, jsonb, timestamptz, integer, integer, text, timestamptz, text) IS
'Insert a job into p_queue and return its id. p_payload (jsonb, NULL = {}; at most backoff.settings.max_payload_bytes, 1 MiB by default, measured as the uncompressed jsonb), p_run_at (first run; NULL = p_now), p_max_attempts (NULL = the policy''s), p_priority (higher first, -32768 to 32767; NULL = 0), p_dedupe_key (while a job of this queue with that key is pending, running or retrying, return its id and insert nothing), p_now (created_at), p_policy (the policy of this job; NULL = its queue''s, from backoff.queues, else ''default''; it comes after p_now so that positional calls keep working, so pass it by name). The job records that policy: remapping the queue later does not change it. A deduplicated call returns the existing job unchanged, whatever p_policy says. A job due now notifies channel backoff_jobs with the queue name as payload, once per transaction and queue, when a worker waits for the queue (backoff.wait_for_jobs).
Errors: 55006 when the queue moves away from this shard (backoffctl shards move, docs/adr/0092): enqueue again, through the router it goes to the new shard; 22023 for a queue, dedupe key or policy that is not 1 to 128 bytes without control or format characters, max_attempts < 1, a priority outside -32768 to 32767, a payload over max_payload_bytes (naming its size and the limit), an empty dedupe key, a run_at outside years 1 to 9999, a p_policy that names no row of backoff.policies, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock. 42501 when the caller is scoped by backoff.grant_queue and may not produce into p_queue.
Example:
SELECT backoff.enqueue(''emails'', ''{"to": "a@example.com"}'');
SELECT backoff.enqueue(''reports'', p_policy => ''conservative'');
SELECT id, queue, policy FROM backoff.jobs ORDER BY id;';

-- backoff.enqueue(queues[], payloads[], run_ats[], max_attempts[],
-- priorities[], dedupe_keys[], now, policies[]): the bulk form, element i of every
-- array describing job i; returns the ids in input order. It has exactly
-- the single-job form's semantics, but a batch without dedupe keys is
-- inserted by ONE set-based INSERT instead of one INSERT per job (about 5x
-- fewer server cycles per job; docs/adr/0016-set-based-bulk-enqueue.md). A
-- batch with a dedupe key goes through the single-job form element by
-- element, which handles the key's conflicts and races. The ids are drawn
-- from the identity sequence before the INSERT so that each one is tied to
-- its element whatever order the rows are inserted in. The checks work on
-- whole arrays and the governing policy is looked up once per distinct
-- (queue, policy), so the cost per job stays close to a hand-written
-- multi-row INSERT's (docs/benchmarks.md).
CREATE OR REPLACE FUNCTION backoff.enqueue(
    p_queues       text[],
    p_payloads     jsonb[],
    p_run_ats      timestamptz[],
    p_max_attempts integer[],
    p_priorities   integer[],
    p_dedupe_keys  text[],
    p_now          timestamptz DEFAULT now(),
    p_policies     text[] DEFAULT NULL
)
RETURNS SETOF bigint
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
-- Its statements read only whole arrays and the small policy, queue and
-- waiting-worker tables: one generic plan each, never re-planned per call.
SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    v_n    integer := coalesce(cardinality(p_queues), 0);
    v_due  text[]  := p_queues;
    v_dims integer := greatest(array_ndims(p_queues), array_ndims(p_payloads), array_ndims(p_run_ats),
                               array_ndims(p_max_attempts), array_ndims(p_priorities), array_ndims(p_dedupe_keys),
                               array_ndims(p_policies));
BEGIN
    p_now := backoff._now(p_now);
    IF p_queues IS NULL
       OR coalesce(cardinality(p_payloads), v_n) <> v_n OR coalesce(cardinality(p_run_ats), v_n) <> v_n
       OR coalesce(cardinality(p_max_attempts), v_n) <> v_n OR coalesce(cardinality(p_priorities), v_n) <> v_n
       OR coalesce(cardinality(p_dedupe_keys), v_n) <> v_n OR coalesce(cardinality(p_policies), v_n) <> v_n THEN
        RAISE EXCEPTION 'enqueue: the arrays must not be null (queues) and must have the same length, got "%" queues', coalesce(v_n::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- A job per element of one dimension (the array functions below refuse
    -- more with 0A000, and a flattened matrix is no batch anyone meant).
    IF v_dims > 1 THEN
        RAISE EXCEPTION 'enqueue: the arrays must have one dimension, got one with "%"', v_dims
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- The checks below work on whole arrays (ANY, array_remove,
    -- array_to_string) rather than scanning unnest once per check, and an
    -- array of NULLs, which a client may send for a field it does not set,
    -- costs about what a NULL array costs (profile in docs/benchmarks.md).
    -- Payload sizes, once for the batch (docs/adr/0059): one scan of the
    -- sizes, and the limit read only when a payload is over 1 KiB, the
    -- smallest limit the setting allows. An array holds its elements
    -- uncompressed, so their size is exact.
    IF EXISTS (SELECT FROM unnest(p_payloads) AS p WHERE pg_catalog.pg_column_size(p) > 1024) THEN
        PERFORM backoff._check_payload(p_payloads);
    END IF;
    IF pg_catalog.cardinality(pg_catalog.array_remove(p_dedupe_keys, NULL)) > 0 THEN
        RETURN QUERY
        SELECT backoff.enqueue(t.queue, t.payload, t.run_at, t.max_attempts, t.priority, t.dedupe_key, p_now, t.policy)
        FROM unnest(p_queues, p_payloads, p_run_ats, p_max_attempts, p_priorities, p_dedupe_keys, p_policies)
             WITH ORDINALITY AS t(queue, payload, run_at, max_attempts, priority, dedupe_key, policy, ord)
        ORDER BY t.ord;
        RETURN;
    END IF;
    -- Names: a NULL, a control or format character anywhere in the batch
    -- (one match over the names joined), or a length outside 1 to 128
    -- bytes; the first bad one is reported by the single-name check.
    IF pg_catalog.array_position(p_queues, NULL) IS NOT NULL
       OR pg_catalog.array_to_string(p_queues, '') ~ backoff._bad_name_chars()
       OR EXISTS (SELECT FROM unnest(p_queues) AS q WHERE octet_length(q) NOT BETWEEN 1 AND 128) THEN
        PERFORM backoff._check_name('queue', q)
        FROM unnest(p_queues) AS q
        WHERE q IS NULL OR octet_length(q) NOT BETWEEN 1 AND 128 OR q ~ backoff._bad_name_chars();
    END IF;
    IF backoff._moves_out() AND EXISTS (SELECT FROM backoff.queue_moves AS m WHERE m.direction = 'out' AND m.queue = ANY (p_queues)) THEN
        RAISE EXCEPTION 'enqueue in queue "%": the queue moves to shard %',
            (SELECT m.queue FROM backoff.queue_moves AS m WHERE m.direction = 'out' AND m.queue = ANY (p_queues) LIMIT 1),
            (SELECT m.peer FROM backoff.queue_moves AS m WHERE m.direction = 'out' AND m.queue = ANY (p_queues) LIMIT 1)
            USING ERRCODE = 'object_in_use',
                  HINT = 'Enqueue again: through the router it goes to the queue''s new shard (docs/sharding.md, moving a queue).';
    END IF;
    IF 1 > ANY (p_max_attempts) THEN
        RAISE EXCEPTION 'max_attempts must be at least 1, got "%"',
            (SELECT min(m) FROM unnest(p_max_attempts) AS m)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF -32768 > ANY (p_priorities) OR 32767 < ANY (p_priorities) THEN
        RAISE EXCEPTION 'priority must be between -32768 and 32767, got "%"',
            (SELECT p FROM unnest(p_priorities) AS p WHERE p NOT BETWEEN -32768 AND 32767 LIMIT 1)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF '0001-01-01 00:00:00+00' > ANY (p_run_ats) OR '10000-01-01 00:00:00+00' <= ANY (p_run_ats) THEN
        RAISE EXCEPTION 'run_at must be a finite time in years 1 to 9999, got "%"',
            (SELECT r FROM unnest(p_run_ats) AS r WHERE r < '0001-01-01 00:00:00+00' OR r >= '10000-01-01 00:00:00+00' LIMIT 1)
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF pg_catalog.cardinality(pg_catalog.array_remove(p_policies, NULL)) > 0 THEN
        PERFORM backoff._check_name('policy', n) FROM unnest(p_policies) AS n WHERE n IS NOT NULL;
        IF EXISTS (SELECT FROM unnest(p_policies) AS n
                   WHERE n IS NOT NULL AND NOT EXISTS (SELECT FROM backoff.policies AS p WHERE p.name = n)) THEN
            RAISE EXCEPTION 'unknown policy "%"',
                (SELECT n FROM unnest(p_policies) AS n
                 WHERE n IS NOT NULL AND NOT EXISTS (SELECT FROM backoff.policies AS p WHERE p.name = n) LIMIT 1)
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF backoff._scope_in_force() THEN
        PERFORM backoff._check_queue(p_queues, 'produce');
    END IF;

    -- The governing policy is looked up once per distinct (queue, policy)
    -- of the batch, not once per job. '' stands for "no policy of its own"
    -- in the join key ('' is not a valid policy name), so the join hashes.
    RETURN QUERY
    WITH src AS MATERIALIZED (
        SELECT t.ord, pg_catalog.nextval('backoff.jobs_id_seq'::regclass) AS id,
               t.queue, t.payload, coalesce(t.run_at, p_now) AS run_at, t.max_attempts, t.priority,
               coalesce(t.policy, '') AS policy
        FROM unnest(p_queues, p_payloads, p_run_ats, p_max_attempts, p_priorities, p_policies)
             WITH ORDINALITY AS t(queue, payload, run_at, max_attempts, priority, policy, ord)
    ), governing AS MATERIALIZED (
        SELECT d.queue, d.policy, g.name
        FROM (SELECT DISTINCT s.queue, s.policy FROM src AS s) AS d
        CROSS JOIN LATERAL backoff._governing_policy(nullif(d.policy, ''), d.queue) AS g
    ), ins AS (
        INSERT INTO backoff.jobs (id, queue, payload, priority, max_attempts, policy, run_at, created_at, segment)
        OVERRIDING SYSTEM VALUE
        SELECT s.id, s.queue, coalesce(s.payload, '{}'), coalesce(s.priority, 0), s.max_attempts,
               g.name, s.run_at, p_now, backoff._current_segment()
        FROM src AS s
        JOIN governing AS g ON g.queue = s.queue AND g.policy = s.policy
    )
    SELECT s.id FROM src AS s ORDER BY s.ord;

    -- Wake the workers waiting for a queue with a job due now: a scan of
    -- the few waiting workers, not of the batch.
    IF p_now < ANY (p_run_ats) THEN
        v_due := ARRAY(SELECT t.queue FROM unnest(p_queues, p_run_ats) AS t(queue, run_at)
                       WHERE coalesce(t.run_at, p_now) <= p_now);
    END IF;
    PERFORM pg_catalog.pg_notify('backoff_jobs', w.queue)
    FROM (SELECT DISTINCT w.queue FROM backoff.waiting_workers AS w
          WHERE w.queue = ANY (v_due) AND w.expires_at > pg_catalog.now()) AS w;
END
$$;

COMMENT ON FUNCTION backoff.enqueue(text[], jsonb[], timestamptz[], integer[], integer[], text[], timestamptz, text[]) IS
'Bulk enqueue: insert one job per element of p_queues (element i of p_payloads, p_run_ats, p_max_attempts, p_priorities, p_dedupe_keys and p_policies goes with it; every array but p_policies is required, a NULL array means all NULL; a call with only NULLs after the queues needs a cast or named arguments to pick this form) and return the ids in input order. Each job gets exactly what backoff.enqueue(p_queue, ...) would give it, dedupe included; a batch without dedupe keys is one set-based INSERT. Atomic: on error no job is added. Notifies channel backoff_jobs once per queue with a job due now and a waiting worker (backoff.wait_for_jobs).
Errors: 55006 when the queue moves away from this shard (backoffctl shards move, docs/adr/0092): enqueue again, through the router it goes to the new shard; 22023 for a NULL p_queues, arrays of different lengths or of more than one dimension, a queue, dedupe key or policy that is not 1 to 128 bytes without control or format characters, a max_attempts < 1, a priority outside -32768 to 32767, a payload over max_payload_bytes (naming its place in the batch, its size and the limit), an empty dedupe key, a run_at outside years 1 to 9999, a policy that names no row of backoff.policies, a p_now that is infinite, outside years 1-9999, or (for a caller outside backoff_admin, time injection off) further than max_clock_skew from now(); p_now NULL is the database clock. 42501 when the caller is scoped by backoff.grant_queue and may not produce into one of the queues.
Example:
SELECT * FROM backoff.enqueue(ARRAY[''emails'', ''emails'', ''sms''], ARRAY[''{"to": "a"}'', ''{"to": "b"}'', NULL]::jsonb[],
                              NULL, NULL, ARRAY[0, 5, 0], NULL);';
