-- backoff.policy_list(): every retry policy, with its durations as whole
-- microseconds (the resolution of an interval), the shape the clients
-- compute delays with (client/policy in Go). PL/pgSQL, whose plan a
-- session keeps: a SQL function that cannot be inlined (a definer) is
-- planned at every call. Workers and admins, who read backoff.policies
-- anyway.
CREATE OR REPLACE FUNCTION backoff.policy_list()
RETURNS TABLE (
    name               text,
    strategy           text,
    base_us            bigint,
    multiplier         double precision,
    exponent           integer,
    schedule_us        bigint[],
    max_delay_us       bigint,
    jitter             text,
    jitter_ratio       double precision,
    max_attempts       integer,
    lease_us           bigint,
    deadline_us        bigint,
    max_lease_expiries integer
)
LANGUAGE plpgsql
STABLE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    RETURN QUERY
    SELECT p.name, p.strategy,
           (extract(epoch FROM p.base) * 1000000)::bigint,
           p.multiplier, p.exponent,
           ARRAY(SELECT (extract(epoch FROM s) * 1000000)::bigint
                 FROM pg_catalog.unnest(p.schedule) WITH ORDINALITY AS u(s, i) ORDER BY i),
           (extract(epoch FROM p.max_delay) * 1000000)::bigint,
           p.jitter, p.jitter_ratio, p.max_attempts,
           (extract(epoch FROM p.lease) * 1000000)::bigint,
           (extract(epoch FROM p.deadline) * 1000000)::bigint,
           p.max_lease_expiries
    FROM backoff.policies AS p
    ORDER BY p.name;
END
$$;

COMMENT ON FUNCTION backoff.policy_list() IS
'Every row of backoff.policies by name, durations in microseconds: base_us, schedule_us (in order), max_delay_us, lease_us, and deadline_us (NULL: no deadline); max_lease_expiries NULL: the default. Workers and admins.
Example:
SELECT name, strategy, base_us, max_delay_us, max_attempts FROM backoff.policy_list();';
