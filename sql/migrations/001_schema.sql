-- Tables and indexes of pgbackoff. The schema itself and tern's version table
-- (backoff.schema_migrations) are created by the migrator before this runs,
-- so that migrating down to zero keeps the version bookkeeping.

-- Named retry policies, written by `backoffctl config apply`. Durations are
-- intervals, numbers are float8 so that SQL and Go compute with the same IEEE
-- doubles (docs/adr/0004-identical-math-in-sql-and-go.md). The limits are
-- those of backoff._delay_us and of the Go mirror's Policy.Validate: delays
-- up to 100 years keep every microsecond count exact in a double (< 2^53),
-- and a jitter ratio is 0 or at least a millionth, because a smaller one
-- underflows float8 (PostgreSQL raises where Go would silently give 0).
CREATE TABLE backoff.policies (
    name         text PRIMARY KEY CHECK (name <> ''),
    strategy     text NOT NULL DEFAULT 'exponential'
                 CHECK (strategy IN ('none', 'fixed', 'linear', 'exponential', 'polynomial', 'schedule')),
    base         interval NOT NULL DEFAULT '1 second'
                 CHECK (base >= interval '0' AND base <= interval '100 years'),
    multiplier   float8 NOT NULL DEFAULT 2.0 CHECK (multiplier >= 1 AND multiplier <= 1000),
    exponent     integer NOT NULL DEFAULT 2 CHECK (exponent BETWEEN 1 AND 10),
    schedule     interval[] NOT NULL DEFAULT '{}'
                 CHECK (array_position(schedule, NULL) IS NULL
                        AND interval '0' <= ALL (schedule) AND interval '100 years' >= ALL (schedule)),
    max_delay    interval NOT NULL DEFAULT '1 minute'
                 CHECK (max_delay >= interval '0' AND max_delay <= interval '100 years'),
    jitter       text NOT NULL DEFAULT 'none' CHECK (jitter IN ('none', 'full', 'equal', 'proportional')),
    jitter_ratio float8 NOT NULL DEFAULT 0.1
                 CHECK (jitter_ratio = 0 OR (jitter_ratio >= 0.000001 AND jitter_ratio <= 1)),
    max_attempts integer NOT NULL DEFAULT 5 CHECK (max_attempts >= 1),
    lease        interval NOT NULL DEFAULT '30 seconds' CHECK (lease > interval '0'),
    deadline     interval CHECK (deadline > interval '0'),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (strategy <> 'schedule' OR cardinality(schedule) > 0)
);

-- The shipped profiles (docs/policies.md has their timelines). 'default' is
-- the policy of a queue with no mapping; it starts as a copy of 'moderate'
-- and `backoffctl config apply` rewrites it from default_policy.
INSERT INTO backoff.policies
    (name, strategy, base, multiplier, max_delay, jitter, jitter_ratio, max_attempts, lease)
VALUES
    ('aggressive',   'exponential', '100 milliseconds', 2.0, '10 seconds', 'equal',        0.1, 10, '30 seconds'),
    ('moderate',     'exponential', '1 second',         2.0, '60 seconds', 'proportional', 0.1, 5,  '30 seconds'),
    ('conservative', 'exponential', '30 seconds',       2.0, '1 hour',     'full',         0.1, 8,  '5 minutes'),
    ('default',      'exponential', '1 second',         2.0, '60 seconds', 'proportional', 0.1, 5,  '30 seconds');

-- Queue → policy mapping; a queue with no row uses the 'default' policy.
CREATE TABLE backoff.queues (
    name       text PRIMARY KEY CHECK (name <> ''),
    policy     text NOT NULL REFERENCES backoff.policies (name) ON UPDATE CASCADE,
    paused     boolean NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE backoff.jobs (
    id                 bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue              text NOT NULL CHECK (queue <> ''),
    payload            jsonb NOT NULL DEFAULT '{}',
    status             text NOT NULL DEFAULT 'pending'
                       CHECK (status IN ('pending', 'running', 'retrying', 'completed', 'dead_lettered', 'cancelled')),
    priority           integer NOT NULL DEFAULT 0,
    attempts           integer NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    max_attempts       integer CHECK (max_attempts >= 1),
    policy             text,
    run_at             timestamptz NOT NULL,
    lease_until        timestamptz,
    locked_by          text,
    last_attempted_at  timestamptz,
    last_failed_at     timestamptz,
    last_error         text,
    errors             jsonb NOT NULL DEFAULT '[]',
    dead_letter_reason text CHECK (dead_letter_reason IN ('max_attempts', 'non_retryable', 'deadline')),
    dedupe_key         text,
    created_at         timestamptz NOT NULL,
    completed_at       timestamptz,
    -- A lease exists exactly while a job runs. Reap's index relies on it.
    CONSTRAINT jobs_lease_while_running CHECK ((status = 'running') = (lease_until IS NOT NULL))
);

-- Claim: due jobs of one queue in claim order. Partial, so finished rows
-- (the bulk of a long-lived table) never enter it.
CREATE INDEX jobs_claimable_idx ON backoff.jobs (queue, priority DESC, run_at, id)
    WHERE status IN ('pending', 'retrying');

-- Reap: running jobs by lease expiry. The predicate is on lease_until (set
-- exactly while running, see the CHECK above) rather than on status, so that
-- only reap's "lease_until < now" can use this index: with "WHERE status =
-- 'running'" a generic plan of the fenced updates (complete, complete_many,
-- fail: "id = $1 AND status = 'running'") may walk every running row here
-- instead of probing the primary key.
CREATE INDEX jobs_lease_idx ON backoff.jobs (lease_until)
    WHERE lease_until IS NOT NULL;

-- Dedupe: one unfinished job per (queue, dedupe_key).
CREATE UNIQUE INDEX jobs_dedupe_key_idx ON backoff.jobs (queue, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running', 'retrying');

---- create above / drop below ----

DROP TABLE backoff.jobs;
DROP TABLE backoff.queues;
DROP TABLE backoff.policies;
