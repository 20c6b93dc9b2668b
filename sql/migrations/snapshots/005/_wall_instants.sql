-- backoff._utc_offset(instant, zone): the zone's UTC offset at p_at.
-- Private.
CREATE OR REPLACE FUNCTION backoff._utc_offset(p_at timestamptz, p_zone text)
RETURNS interval
LANGUAGE sql
STABLE PARALLEL SAFE
AS $$
    SELECT (p_at AT TIME ZONE p_zone) - (p_at AT TIME ZONE 'UTC')
$$;

-- backoff._wall_instants(wall, zone, fixed_time): the instants at which a
-- cron schedule fires for the wall-clock time p_wall in p_zone, in order
-- (docs/adr/0063, as cron does):
--   a wall time that occurs once -> that instant;
--   one that occurs twice (a fall-back hour) -> the first occurrence for a
--     fixed-time schedule, both for one whose minute or hour field is a
--     wildcard (it runs by elapsed time, at least hourly);
--   one that does not occur (a spring-forward gap) -> the first instant
--     after the gap for a fixed-time schedule, none for a wildcard one
--     (its next slot after the gap comes on time).
-- The occurrences are found from three mappings of p_wall: PostgreSQL's
-- own, and those made from 3 hours before and after (outside any shift of
-- at most 3 hours, so each takes one side's offset); a mapping counts when
-- it maps back to p_wall. In a gap none does, and the end of the gap is
-- found by bisection to the second between the two sides' mappings.
-- Private; called only near an offset change (backoff._next_fire).
CREATE OR REPLACE FUNCTION backoff._wall_instants(p_wall timestamp, p_zone text, p_fixed_time boolean)
RETURNS timestamptz[]
LANGUAGE plpgsql
STABLE PARALLEL SAFE
AS $$
DECLARE
    v_found timestamptz[];
    v_lo    double precision;
    v_hi    double precision;
    v_mid   double precision;
BEGIN
    v_found := ARRAY(
        SELECT DISTINCT c
        FROM pg_catalog.unnest(ARRAY[p_wall AT TIME ZONE p_zone,
                                     ((p_wall - interval '3 hours') AT TIME ZONE p_zone) + interval '3 hours',
                                     ((p_wall + interval '3 hours') AT TIME ZONE p_zone) - interval '3 hours']) AS c
        WHERE (c AT TIME ZONE p_zone) = p_wall
        ORDER BY c);
    IF pg_catalog.cardinality(v_found) > 0 THEN
        RETURN CASE WHEN p_fixed_time THEN v_found[1:1] ELSE v_found END;
    END IF;
    IF NOT p_fixed_time THEN
        RETURN '{}';
    END IF;
    -- In the gap: the local time before it is earlier than p_wall, after
    -- it later. Find the first second whose local time is past p_wall.
    v_lo := extract(epoch FROM ((p_wall + interval '3 hours') AT TIME ZONE p_zone) - interval '3 hours');
    v_hi := extract(epoch FROM ((p_wall - interval '3 hours') AT TIME ZONE p_zone) + interval '3 hours');
    IF v_lo > v_hi THEN
        v_mid := v_lo; v_lo := v_hi; v_hi := v_mid;
    END IF;
    WHILE v_hi - v_lo > 1 LOOP
        v_mid := pg_catalog.floor((v_lo + v_hi) / 2);
        IF (pg_catalog.to_timestamp(v_mid) AT TIME ZONE p_zone) > p_wall THEN
            v_hi := v_mid;
        ELSE
            v_lo := v_mid;
        END IF;
    END LOOP;
    RETURN ARRAY[pg_catalog.to_timestamp(v_hi)];
END
$$;
