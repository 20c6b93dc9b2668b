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
