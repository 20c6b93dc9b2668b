-- Candidate B, hot/history split with rotating segments.
--
-- Live jobs (pending, running, retrying) live in b.hot, a table partitioned
-- into three segments; inserts go to the segment b.segments marks current.
-- Finishing a job moves it: DELETE from b.hot and INSERT into b.history in
-- one statement. b.history is insert-only, so an old snapshot leaves no dead
-- rows there. b.maintain switches the insert target when the current
-- segment has taken enough jobs, moves the few live rows left in an old
-- segment to the current one, and TRUNCATEs the old segment once it is
-- empty. TRUNCATE drops the segment's dead rows and dead index entries
-- whatever snapshot is open: that is what bounds the dead entries a claim
-- walks to those of about one segment.
--
-- Partitions (not three independent tables) so that one index scan per
-- segment, merged (MergeAppend), gives the claim order across segments:
-- priority and run_at stay exact while a job waits in an old segment.
DROP SCHEMA IF EXISTS b CASCADE;
CREATE SCHEMA b;

CREATE SEQUENCE b.jobs_id_seq;

CREATE TABLE b.hot (
    seg          smallint NOT NULL,
    id           bigint NOT NULL DEFAULT nextval('b.jobs_id_seq'),
    queue        text NOT NULL,
    payload      jsonb NOT NULL DEFAULT '{}',
    status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'running', 'retrying')),
    priority     integer NOT NULL DEFAULT 0,
    attempts     integer NOT NULL DEFAULT 0,
    run_at       timestamptz NOT NULL,
    lease_until  timestamptz,
    locked_by    text,
    created_at   timestamptz NOT NULL
) PARTITION BY LIST (seg);
CREATE TABLE b.hot_0 PARTITION OF b.hot FOR VALUES IN (0);
CREATE TABLE b.hot_1 PARTITION OF b.hot FOR VALUES IN (1);
CREATE TABLE b.hot_2 PARTITION OF b.hot FOR VALUES IN (2);
-- Vacuum still matters while no snapshot is old: the segments are vacuumed
-- like a busy backoff.jobs.
ALTER TABLE b.hot_0 SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE b.hot_1 SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.02);
ALTER TABLE b.hot_2 SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0, autovacuum_analyze_scale_factor = 0.02);

-- A partitioned table's unique index must contain the partition key, so id
-- is not declared unique here: the sequence makes it so, b.history's
-- primary key checks it when the job finishes.
CREATE INDEX hot_id_idx ON b.hot (id);
CREATE INDEX hot_claimable_idx ON b.hot (queue, priority DESC, run_at, id) INCLUDE (status)
    WHERE status IN ('pending', 'retrying');
CREATE INDEX hot_lease_idx ON b.hot (lease_until) WHERE lease_until IS NOT NULL;

CREATE TABLE b.history (
    id           bigint PRIMARY KEY,
    queue        text NOT NULL,
    payload      jsonb NOT NULL,
    status       text NOT NULL CHECK (status IN ('completed', 'dead_lettered', 'cancelled')),
    priority     integer NOT NULL,
    attempts     integer NOT NULL,
    run_at       timestamptz NOT NULL,
    locked_by    text,
    created_at   timestamptz NOT NULL,
    completed_at timestamptz NOT NULL
) WITH (autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 100000,
        autovacuum_analyze_scale_factor = 0.02);
CREATE INDEX history_finished_idx ON b.history (queue, completed_at, id) INCLUDE (status);

-- One row per segment: exactly one current (inserts go there), draining
-- ones wait to be emptied and truncated, free ones are empty.
CREATE TABLE b.segments (
    seg         smallint PRIMARY KEY,
    state       text NOT NULL CHECK (state IN ('current', 'draining', 'free')),
    switched_at timestamptz NOT NULL DEFAULT now(),
    first_id    bigint NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX segments_one_current ON b.segments (state) WHERE state = 'current';
INSERT INTO b.segments (seg, state) VALUES (0, 'current'), (1, 'free'), (2, 'free');

CREATE FUNCTION b.counts(OUT enqueued bigint, OUT completed bigint, OUT live bigint, OUT distinct_ids bigint)
LANGUAGE sql STABLE AS $$
    SELECT (SELECT count(*) FROM b.hot) + (SELECT count(*) FROM b.history),
           (SELECT count(*) FROM b.history WHERE status = 'completed'),
           (SELECT count(*) FROM b.hot),
           (SELECT count(DISTINCT u.id) FROM (SELECT id FROM b.hot UNION ALL SELECT id FROM b.history) AS u)
$$;
CREATE FUNCTION b.completed_since(p_queue text, p_since timestamptz) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM b.history AS h WHERE h.queue = p_queue AND h.completed_at > p_since
$$;
CREATE FUNCTION b.backlog(p_queue text) RETURNS bigint
LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM b.hot AS j WHERE j.queue = p_queue AND j.status IN ('pending', 'retrying')
$$;
