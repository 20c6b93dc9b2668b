-- pgbackoff extension script, generated from sql/migrations.
-- Do not edit: run `make generate` after changing sql/.
\echo Use "CREATE EXTENSION backoff" to load this file. \quit

CREATE TABLE backoff.schema_migrations (version int4 NOT NULL);
INSERT INTO backoff.schema_migrations (version) VALUES (2);

-- ===== migration 1: 001_schema.sql =====

-- Tables and indexes of pgbackoff. The schema itself and tern's version table
-- (backoff.schema_migrations) are created by the migrator before this runs,
-- so that migrating down to zero keeps the version bookkeeping.

-- Named retry policies, written by `backoffctl config apply`. Durations are
-- intervals, numbers are float8 so that SQL and Go compute with the same IEEE
-- doubles (docs/adr/0004-identical-math-in-sql-and-go.md). The limits are
-- those of backoff._delay_us and of the Go mirror's Policy.Validate: delays
-- up to 100 years (876600 hours: years of 365.25 days, written in hours
-- because interval comparison counts a year as 360 days) keep every
-- microsecond count exact in a double (< 2^53),
-- and a jitter ratio is 0 or at least a millionth, because a smaller one
-- underflows float8 (PostgreSQL raises where Go would silently give 0).
CREATE TABLE backoff.policies (
    name         text PRIMARY KEY CHECK (name <> ''),
    strategy     text NOT NULL DEFAULT 'exponential'
                 CHECK (strategy IN ('none', 'fixed', 'linear', 'exponential', 'polynomial', 'schedule')),
    base         interval NOT NULL DEFAULT '1 second'
                 CHECK (base >= interval '0' AND base <= interval '876600 hours'),
    multiplier   float8 NOT NULL DEFAULT 2.0 CHECK (multiplier >= 1 AND multiplier <= 1000),
    exponent     integer NOT NULL DEFAULT 2 CHECK (exponent BETWEEN 1 AND 10),
    schedule     interval[] NOT NULL DEFAULT '{}'
                 CHECK (array_position(schedule, NULL) IS NULL
                        AND interval '0' <= ALL (schedule) AND interval '876600 hours' >= ALL (schedule)),
    max_delay    interval NOT NULL DEFAULT '1 minute'
                 CHECK (max_delay >= interval '0' AND max_delay <= interval '876600 hours'),
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
    completed_at       timestamptz
);

-- Claim: due jobs of one queue in claim order. Partial, so finished rows
-- (the bulk of a long-lived table) never enter it.
CREATE INDEX jobs_claimable_idx ON backoff.jobs (queue, priority DESC, run_at, id)
    WHERE status IN ('pending', 'retrying');

-- Reap: running jobs by lease expiry.
CREATE INDEX jobs_running_lease_idx ON backoff.jobs (lease_until)
    WHERE status = 'running';

-- Dedupe: one unfinished job per (queue, dedupe_key).
CREATE UNIQUE INDEX jobs_dedupe_key_idx ON backoff.jobs (queue, dedupe_key)
    WHERE dedupe_key IS NOT NULL AND status IN ('pending', 'running', 'retrying');

-- ===== migration 2: 002_functions.sql =====

-- Installs every public and private function of the backoff schema.
-- "unreleased" is the working copy in sql/functions; when a version is
-- released its functions are frozen into snapshots/NNN and this line names
-- that snapshot instead (docs/adr/0003-migrations-and-function-versioning.md).
-- The function files, in dependency order. Each file creates one function
-- (with its overloads) and, for public functions, its COMMENT.
-- backoff.schema_version(): the migration version installed in this
-- database, so clients can refuse to run against an older schema.
CREATE OR REPLACE FUNCTION backoff.schema_version()
RETURNS integer
LANGUAGE sql
STABLE
AS $$
    SELECT version FROM backoff.schema_migrations
$$;

COMMENT ON FUNCTION backoff.schema_version() IS
'The pgbackoff migration version installed in this database. Clients compare it with the version they need and ask for `backoffctl migrate up` when it is older.';

-- backoff._interval_us(interval): an interval as whole microseconds. Private.
-- A month counts as 30 days and a day as 24 hours: the linearization
-- PostgreSQL's interval comparison uses, so a CHECK such as
-- "base <= interval '876600 hours'" and this conversion agree. (extract(epoch)
-- alone would count a year as 365.25 days but compare it as 360.) Exact: the
-- months are taken out before extract(epoch …), which is numeric.
CREATE OR REPLACE FUNCTION backoff._interval_us(p_interval interval)
RETURNS bigint
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT ((extract(year FROM p_interval) * 12 + extract(month FROM p_interval)) * 2592000000000
            + extract(epoch FROM p_interval - make_interval(years => extract(year FROM p_interval)::integer,
                                                            months => extract(month FROM p_interval)::integer)) * 1000000
           )::bigint
$$;

-- backoff._clamped_power(x, k): x^k for x >= 1 by binary exponentiation,
-- clamped at 2^60. Private.
--
-- Why not power(): the Go mirror must produce the same double, bit for bit.
-- pow() in C and math.Pow in Go round differently; the same sequence of IEEE
-- multiplications does not. Binary exponentiation needs at most ~62
-- multiplications for any k < 2^31, and the clamp keeps every product finite
-- (PostgreSQL raises on float8 overflow). The clamp never changes a capped
-- delay: every factor is >= 1, so once a partial product reaches 2^60 the
-- result does too, and any delay of base (>= 1 µs) × 2^60 µs (36,559 years)
-- is above every allowed max (100 years). docs/adr/0004-identical-math-in-sql-and-go.md
CREATE OR REPLACE FUNCTION backoff._clamped_power(p_x float8, p_k integer)
RETURNS float8
LANGUAGE plpgsql
IMMUTABLE STRICT PARALLEL SAFE
AS $$
DECLARE
    c_limit CONSTANT float8 := 1152921504606846976.0;  -- 2^60
    v_result float8 := 1.0;
    v_square float8 := p_x;
    v_k integer := p_k;
BEGIN
    WHILE v_k > 0 LOOP
        IF v_k % 2 = 1 THEN
            v_result := LEAST(v_result * v_square, c_limit);
        END IF;
        v_k := v_k / 2;
        IF v_k > 0 THEN
            v_square := LEAST(v_square * v_square, c_limit);
        END IF;
    END LOOP;
    RETURN v_result;
END
$$;

-- backoff._jitter_unit(seed, attempt): the deterministic u in [0, 1) used by
-- jitter: the first 8 hex digits of md5('SEED:ATTEMPT') read as an unsigned
-- 32-bit integer, divided by 2^32 (exact in a double). Private.
CREATE OR REPLACE FUNCTION backoff._jitter_unit(p_seed bigint, p_attempt integer)
RETURNS float8
LANGUAGE sql
IMMUTABLE STRICT PARALLEL SAFE
AS $$
    SELECT ('x' || substr(md5(p_seed::text || ':' || p_attempt::text), 1, 8))::bit(32)::bigint::float8
           / 4294967296.0::float8
$$;

-- backoff._delay_us(...): the backoff delay in microseconds for failed
-- attempt p_attempt (1-based) under explicit policy parameters, jitter
-- included. Private: the one implementation of DESIGN §5 that every other
-- function calls. Durations are microseconds (bigint); arithmetic is in
-- float8, one operator at a time, in the same order as the Go mirror
-- (client/policy/delay.go), so both give the same result to the microsecond
-- (docs/adr/0004-identical-math-in-sql-and-go.md). Change one, change both,
-- and the shared vectors (client/policy/testdata/vectors.json) tell.
--
-- Limits (the same as the policies table's CHECKs and Policy.Validate):
-- durations 0..100 years (3155760000000000 µs, below 2^53 so exact in a
-- double), multiplier 1..1000, exponent 1..10, jitter_ratio 0 or
-- 0.000001..1 (a smaller ratio underflows float8, which PostgreSQL raises).
-- A NULL seed is seed 0.
CREATE OR REPLACE FUNCTION backoff._delay_us(
    p_strategy     text,
    p_base_us      bigint,
    p_multiplier   float8,
    p_exponent     integer,
    p_schedule_us  bigint[],
    p_max_us       bigint,
    p_jitter       text,
    p_jitter_ratio float8,
    p_attempt      integer,
    p_seed         bigint
)
RETURNS bigint
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    c_limit_us CONSTANT bigint := 3155760000000000;  -- 100 years
    v_delay float8;
    v_max   float8;
    v_len   integer;
    v_entry bigint;
    v_u     float8;
BEGIN
    IF p_attempt IS NULL OR p_attempt < 1 THEN
        RAISE EXCEPTION 'attempt must be at least 1, got "%"', coalesce(p_attempt::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_base_us IS NULL OR p_base_us < 0 OR p_base_us > c_limit_us THEN
        RAISE EXCEPTION 'base must be between 0 and 100 years, got "%" µs', coalesce(p_base_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_us IS NULL OR p_max_us < 0 OR p_max_us > c_limit_us THEN
        RAISE EXCEPTION 'max must be between 0 and 100 years, got "%" µs', coalesce(p_max_us::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_max := p_max_us::float8;

    CASE p_strategy
    WHEN 'none' THEN
        v_delay := 0;
    WHEN 'fixed' THEN
        v_delay := p_base_us::float8;
    WHEN 'linear' THEN
        v_delay := p_base_us::float8 * p_attempt::float8;
    WHEN 'exponential' THEN
        -- NaN compares above every number in PostgreSQL, so "> 1000" rejects it.
        IF p_multiplier IS NULL OR NOT (p_multiplier >= 1 AND p_multiplier <= 1000) THEN
            RAISE EXCEPTION 'multiplier must be between 1 and 1000, got "%"', coalesce(p_multiplier::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_multiplier, p_attempt - 1);
    WHEN 'polynomial' THEN
        IF p_exponent IS NULL OR p_exponent < 1 OR p_exponent > 10 THEN
            RAISE EXCEPTION 'exponent must be between 1 and 10, got "%"', coalesce(p_exponent::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := p_base_us::float8 * backoff._clamped_power(p_attempt::float8, p_exponent);
    WHEN 'schedule' THEN
        v_len := cardinality(p_schedule_us);
        IF v_len IS NULL OR v_len = 0 THEN
            RAISE EXCEPTION 'schedule must not be empty for strategy "schedule"'
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_entry := p_schedule_us[LEAST(p_attempt, v_len)];
        IF v_entry IS NULL OR v_entry < 0 OR v_entry > c_limit_us THEN
            RAISE EXCEPTION 'schedule entries must be between 0 and 100 years, got "%" µs', coalesce(v_entry::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_delay := v_entry::float8;
    ELSE
        RAISE EXCEPTION 'unknown strategy "%"', coalesce(p_strategy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, fixed, linear, exponential, polynomial or schedule';
    END CASE;

    -- The cap.
    v_delay := LEAST(v_delay, v_max);

    -- Jitter, with u from md5('SEED:ATTEMPT'). Each float8 operator rounds on
    -- its own; Go converts explicitly to stop fused multiply-add.
    CASE p_jitter
    WHEN 'none' THEN
        NULL;
    WHEN 'full' THEN
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := v_delay * v_u;
    WHEN 'equal' THEN
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := v_delay / 2 + v_delay / 2 * v_u;
    WHEN 'proportional' THEN
        IF p_jitter_ratio IS NULL
           OR NOT (p_jitter_ratio = 0 OR (p_jitter_ratio >= 0.000001 AND p_jitter_ratio <= 1)) THEN
            RAISE EXCEPTION 'jitter_ratio must be 0 or between 0.000001 and 1, got "%"', coalesce(p_jitter_ratio::text, 'NULL')
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_u := backoff._jitter_unit(coalesce(p_seed, 0), p_attempt);
        v_delay := LEAST(v_delay * (1 - p_jitter_ratio + 2 * p_jitter_ratio * v_u), v_max);
    ELSE
        RAISE EXCEPTION 'unknown jitter "%"', coalesce(p_jitter, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'use none, full, equal or proportional';
    END CASE;

    -- Whole microseconds, rounded down: never above the cap.
    RETURN floor(v_delay)::bigint;
END
$$;

-- backoff._policy_delay_us(policy row, attempt, seed): _delay_us with the
-- parameters of a policies row. Private; shared by retry_delay, schedule and
-- the retry-or-dead-letter decision.
CREATE OR REPLACE FUNCTION backoff._policy_delay_us(
    p_policy  backoff.policies,
    p_attempt integer,
    p_seed    bigint
)
RETURNS bigint
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT backoff._delay_us(
        (p_policy).strategy,
        backoff._interval_us((p_policy).base),
        (p_policy).multiplier,
        (p_policy).exponent,
        ARRAY(SELECT backoff._interval_us(s) FROM unnest((p_policy).schedule) AS s),
        backoff._interval_us((p_policy).max_delay),
        (p_policy).jitter,
        (p_policy).jitter_ratio,
        p_attempt,
        p_seed)
$$;

-- backoff.retry_delay(policy, attempt, seed): the delay before the retry
-- that follows failed attempt p_attempt (1-based) under a named policy,
-- jitter included, deterministic from p_seed (normally the job id).
CREATE OR REPLACE FUNCTION backoff.retry_delay(
    p_policy  text,
    p_attempt integer,
    p_seed    bigint DEFAULT 0
)
RETURNS interval
LANGUAGE plpgsql
STABLE PARALLEL SAFE
AS $$
DECLARE
    v_policy backoff.policies;
BEGIN
    SELECT * INTO v_policy FROM backoff.policies WHERE name = p_policy;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown policy "%"', coalesce(p_policy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN backoff._policy_delay_us(v_policy, p_attempt, coalesce(p_seed, 0)) * interval '1 microsecond';
END
$$;

COMMENT ON FUNCTION backoff.retry_delay(text, integer, bigint) IS
'Delay before the retry that follows failed attempt p_attempt (1-based) under the named policy, jitter included and deterministic from p_seed (normally the job id). Raises 22023 for an unknown policy or an attempt below 1.
Example: SELECT backoff.retry_delay(''moderate'', 3, 42);';

-- backoff.compute_delay(...): the backoff delay of DESIGN §5 for explicit
-- policy parameters, no table involved: pure and IMMUTABLE, so it can be
-- used in indexes, generated columns, and by callers that keep their policy
-- elsewhere. Parameters a strategy or jitter does not use are ignored.
CREATE OR REPLACE FUNCTION backoff.compute_delay(
    p_strategy     text,
    p_base         interval,
    p_multiplier   float8,
    p_exponent     integer,
    p_schedule     interval[],
    p_max          interval,
    p_jitter       text,
    p_jitter_ratio float8,
    p_attempt      integer,
    p_seed         bigint DEFAULT 0
)
RETURNS interval
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    c_limit CONSTANT interval := interval '876600 hours';  -- 100 years of 365.25 days
    v_entry interval;
BEGIN
    -- Intervals are checked before they become microseconds: a huge interval
    -- would otherwise fail as a bigint overflow instead of a clear 22023.
    IF p_base IS NULL OR p_base < interval '0' OR p_base > c_limit THEN
        RAISE EXCEPTION 'base must be between 0 and 100 years, got "%"', coalesce(p_base::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max IS NULL OR p_max < interval '0' OR p_max > c_limit THEN
        RAISE EXCEPTION 'max must be between 0 and 100 years, got "%"', coalesce(p_max::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_strategy = 'schedule' THEN
        FOREACH v_entry IN ARRAY coalesce(p_schedule, '{}') LOOP
            IF v_entry IS NULL OR v_entry < interval '0' OR v_entry > c_limit THEN
                RAISE EXCEPTION 'schedule entries must be between 0 and 100 years, got "%"', coalesce(v_entry::text, 'NULL')
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
        END LOOP;
    END IF;
    RETURN backoff._delay_us(
        p_strategy,
        backoff._interval_us(p_base),
        p_multiplier,
        p_exponent,
        ARRAY(SELECT backoff._interval_us(s) FROM unnest(p_schedule) AS s),
        backoff._interval_us(p_max),
        p_jitter,
        p_jitter_ratio,
        p_attempt,
        p_seed) * interval '1 microsecond';
END
$$;

COMMENT ON FUNCTION backoff.compute_delay(text, interval, float8, integer, interval[], interval, text, float8, integer, bigint) IS
'Backoff delay before the retry that follows failed attempt p_attempt (1-based), from explicit policy parameters: strategy none|fixed|linear|exponential|polynomial|schedule, then the cap p_max, then jitter none|full|equal|proportional with u from md5(''SEED:ATTEMPT''). Pure and IMMUTABLE; identical to the Go mirror (client/policy) to the microsecond. Raises 22023 naming the bad parameter. docs/policies.md has the formulas.
Example: SELECT backoff.compute_delay(''exponential'', ''1 second'', 2.0, 2, ''{}'', ''1 minute'', ''proportional'', 0.1, 3, 42);';

-- backoff.schedule(policy, attempts, seed): the retry timeline of a named
-- policy, one row per failed attempt: the delay before the next try (jitter
-- included, from p_seed) and the cumulative wait since the first failure.
-- Every row comes from backoff._policy_delay_us, the function fail and reap
-- use, so the timeline is what jobs will really do.
CREATE OR REPLACE FUNCTION backoff.schedule(
    p_policy   text,
    p_attempts integer DEFAULT 10,
    p_seed     bigint DEFAULT 0
)
RETURNS TABLE (attempt integer, delay interval, cumulative interval)
LANGUAGE plpgsql
STABLE PARALLEL SAFE
AS $$
DECLARE
    v_policy backoff.policies;
BEGIN
    -- 1000 rows of at most 100 years each stay inside interval's range.
    IF p_attempts IS NULL OR p_attempts < 1 OR p_attempts > 1000 THEN
        RAISE EXCEPTION 'attempts must be between 1 and 1000, got "%"', coalesce(p_attempts::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT * INTO v_policy FROM backoff.policies AS p WHERE p.name = p_policy;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'unknown policy "%"', coalesce(p_policy, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN QUERY
        SELECT g.n, d.v_delay, sum(d.v_delay) OVER (ORDER BY g.n)
        FROM generate_series(1, p_attempts) AS g(n)
        CROSS JOIN LATERAL (
            SELECT backoff._policy_delay_us(v_policy, g.n, coalesce(p_seed, 0)) * interval '1 microsecond' AS v_delay
        ) AS d
        ORDER BY g.n;
END
$$;

COMMENT ON FUNCTION backoff.schedule(text, integer, bigint) IS
'The retry timeline of the named policy: for failed attempts 1..p_attempts (at most 1000), the delay before the next try (jitter included, deterministic from p_seed, as for a job whose id is p_seed) and the cumulative wait. What an operator reads before choosing a policy; backoffctl schedule prints the same numbers. Raises 22023 for an unknown policy.
Example: SELECT * FROM backoff.schedule(''moderate'', 5, 42);';

-- backoff._step_backoff(request, attempts, max, multiplier): validates the
-- parameters of calculate_step_next_retry_time and returns the delay of its
-- fallback path, LEAST(multiplier^attempts seconds, max seconds). Private;
-- shared by the timestamptz and timestamp overloads.
--
-- tasker-core's expression power(multiplier, attempts) overflows numeric
-- (and float8) for large attempts. Here the cap is decided before any
-- exponentiation: when attempts × ln(multiplier) exceeds ln(max) + 1, the
-- power is above e × max and the result is max; the margin of 1 is far wider
-- than any float8 rounding of the logarithms. Otherwise the power is at most
-- about 2.7 × max (≤ 5.9e9) and is computed with the original expression,
-- so every result the original could compute comes out the same: numeric
-- power, then PostgreSQL's interval multiplication, which rounds fractional
-- seconds to the nearest microsecond (1.1^3 → 1.331 s).
--
-- attempts NULL follows the original too: LEAST ignores the NULL power, so
-- the delay is max.
CREATE OR REPLACE FUNCTION backoff._step_backoff(
    p_request_seconds integer,
    p_attempts        integer,
    p_max_seconds     integer,
    p_multiplier      numeric
)
RETURNS interval
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    v_max interval;
BEGIN
    IF p_request_seconds < 0 THEN
        RAISE EXCEPTION 'backoff_request_seconds must not be negative, got "%"', p_request_seconds
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_attempts < 0 THEN
        RAISE EXCEPTION 'attempts must not be negative, got "%"', p_attempts
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_seconds IS NULL OR p_max_seconds <= 0 THEN
        RAISE EXCEPTION 'p_max_backoff_seconds must be positive, got "%"', coalesce(p_max_seconds::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- NaN is neither < 1 nor finite; 'Infinity' is not finite.
    IF p_multiplier IS NULL OR p_multiplier = 'NaN'::numeric OR p_multiplier = 'Infinity'::numeric
       OR p_multiplier < 1 THEN
        RAISE EXCEPTION 'p_backoff_multiplier must be a finite number of at least 1, got "%"', coalesce(p_multiplier::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    v_max := p_max_seconds * interval '1 second';
    IF p_attempts IS NULL THEN
        RETURN v_max;
    END IF;
    IF p_attempts > 0 AND p_multiplier > p_max_seconds THEN
        RETURN v_max;  -- multiplier^attempts >= multiplier > max (and ln needs no huge float8)
    END IF;
    IF p_attempts::float8 * ln(p_multiplier::float8) > ln(p_max_seconds::float8) + 1 THEN
        RETURN v_max;
    END IF;
    RETURN LEAST(power(p_multiplier, p_attempts::numeric) * interval '1 second', v_max);
END
$$;

-- backoff.calculate_step_next_retry_time(...): tasker-core's dual-path rule
-- (TAS-57), drop-in, with its parameter names and defaults: an explicit
-- request (backoff_request_seconds after last_attempted_at) wins; otherwise
-- failure_time + LEAST(multiplier^attempts seconds, max seconds); otherwise
-- NULL. Unlike the original it never overflows (attempts up to 2^31-1), and
-- rejects invalid parameters with 22023 whichever path applies. Fractional
-- seconds of the power are kept to the microsecond (rounded to nearest, as
-- the original expression does). The timestamp overload serves users of the
-- original's timestamp-without-time-zone columns.
CREATE OR REPLACE FUNCTION backoff.calculate_step_next_retry_time(
    backoff_request_seconds integer,
    last_attempted_at       timestamptz,
    failure_time            timestamptz,
    attempts                integer,
    p_max_backoff_seconds   integer DEFAULT 60,
    p_backoff_multiplier    numeric DEFAULT 2.0
)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE PARALLEL SAFE
AS $$
DECLARE
    -- Validates every parameter, whichever path applies.
    v_fallback interval := backoff._step_backoff(backoff_request_seconds, attempts,
                                                 p_max_backoff_seconds, p_backoff_multiplier);
BEGIN
    IF backoff_request_seconds IS NOT NULL AND last_attempted_at IS NOT NULL THEN
        RETURN last_attempted_at + backoff_request_seconds * interval '1 second';
    END IF;
    RETURN failure_time + v_fallback;  -- NULL when failure_time is NULL
END
$$;

CREATE OR REPLACE FUNCTION backoff.calculate_step_next_retry_time(
    backoff_request_seconds integer,
    last_attempted_at       timestamp,
    failure_time            timestamp,
    attempts                integer,
    p_max_backoff_seconds   integer DEFAULT 60,
    p_backoff_multiplier    numeric DEFAULT 2.0
)
RETURNS timestamp
LANGUAGE plpgsql
IMMUTABLE PARALLEL SAFE
AS $$
DECLARE
    -- Validates every parameter, whichever path applies.
    v_fallback interval := backoff._step_backoff(backoff_request_seconds, attempts,
                                                 p_max_backoff_seconds, p_backoff_multiplier);
BEGIN
    IF backoff_request_seconds IS NOT NULL AND last_attempted_at IS NOT NULL THEN
        RETURN last_attempted_at + backoff_request_seconds * interval '1 second';
    END IF;
    RETURN failure_time + v_fallback;  -- NULL when failure_time is NULL
END
$$;

COMMENT ON FUNCTION backoff.calculate_step_next_retry_time(integer, timestamptz, timestamptz, integer, integer, numeric) IS
'tasker-core''s dual-path retry time: last_attempted_at + backoff_request_seconds when both are given; else failure_time + LEAST(p_backoff_multiplier^attempts, p_max_backoff_seconds) seconds (fractions kept to the microsecond); else NULL. Never overflows, for any attempts up to 2^31-1. Raises 22023 naming the parameter for negative attempts or backoff_request_seconds, p_max_backoff_seconds <= 0, p_backoff_multiplier < 1, NaN or infinite.
Example: SELECT backoff.calculate_step_next_retry_time(NULL, NULL, ''2025-01-01 00:00:00+00'', 3);  -- 00:00:08';

COMMENT ON FUNCTION backoff.calculate_step_next_retry_time(integer, timestamp, timestamp, integer, integer, numeric) IS
'The timestamp-without-time-zone overload of calculate_step_next_retry_time, for drop-in users of tasker-core''s original: same rule, same errors.
Example: SELECT backoff.calculate_step_next_retry_time(30, ''2025-01-01 00:00:00'', NULL, 0);  -- 00:00:30';
