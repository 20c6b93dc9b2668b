-- backoff.maintain(limit, for, every, fire_schedules): the maintenance a
-- Worker runs (reap and rotate, and fire_schedules when asked), at the
-- Worker's cadence, for a deployment without one (docs/adr/0081).
-- Rotation must switch segments within seconds for a held snapshot not to
-- slow the claims, and pg_cron's finest schedule is a minute before
-- pg_cron 1.5: one call runs a round every p_every for p_for, so a pg_cron
-- job every minute (backoffctl cron install) keeps a cadence of a second.
-- Each round is a READ COMMITTED transaction of its own, whatever the
-- database's default, since rotate truncates only there (docs/adr/0078),
-- and a round's work is committed before the next begins.
--
-- A procedure, since only a procedure may COMMIT between rounds; and so
-- SECURITY INVOKER without SET clauses, which PostgreSQL requires of a
-- procedure that commits: it calls the public functions, which check the
-- caller as any call does, and qualifies every name and operator.
CREATE OR REPLACE PROCEDURE backoff.maintain(
    p_limit          integer  DEFAULT 1000,
    p_for            interval DEFAULT interval '55 seconds',
    p_every          interval DEFAULT interval '1 second',
    p_fire_schedules boolean  DEFAULT false
)
LANGUAGE plpgsql
AS $$
DECLARE
    v_until timestamptz;
BEGIN
    IF p_for IS NULL OR p_for OPERATOR(pg_catalog.<) interval '0'
       OR p_for OPERATOR(pg_catalog.>) interval '1 hour' THEN
        RAISE EXCEPTION 'maintain: p_for must be between 0 and 1 hour, got "%"', coalesce(p_for::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_every IS NULL OR p_every OPERATOR(pg_catalog.<) interval '10 milliseconds'
       OR p_every OPERATOR(pg_catalog.>) interval '1 minute' THEN
        RAISE EXCEPTION 'maintain: p_every must be between 10 milliseconds and 1 minute, got "%"', coalesce(p_every::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_until := pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) p_for;
    LOOP
        -- Ends the caller's transaction (or the previous sleep's), so that
        -- the round starts one of its own at the level it needs.
        COMMIT;
        SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
        PERFORM backoff.reap(p_limit => p_limit);
        PERFORM backoff.rotate();
        IF p_fire_schedules THEN
            PERFORM FROM backoff.fire_schedules(p_limit => p_limit);
        END IF;
        COMMIT;
        EXIT WHEN pg_catalog.clock_timestamp() OPERATOR(pg_catalog.+) p_every OPERATOR(pg_catalog.>) v_until;
        PERFORM pg_catalog.pg_sleep_for(p_every);
    END LOOP;
END
$$;

COMMENT ON PROCEDURE backoff.maintain(integer, interval, interval, boolean) IS
'Run the maintenance a Worker runs, at its cadence, where no Worker runs: every p_every (10 ms to 1 minute, default 1 second) for p_for (0 to 1 hour, default 55 seconds), reap expired leases (at most p_limit a round), rotate the job segments and, with p_fire_schedules, fire the schedules due (at most p_limit jobs a round). Each round is a READ COMMITTED transaction of its own, committed before the next, whatever the database''s default isolation (rotate truncates only at READ COMMITTED). A procedure: CALL it outside a transaction block (a pg_cron job does; backoffctl cron install schedules CALL backoff.maintain() every minute). p_for 0 runs one round. The caller needs EXECUTE on reap, rotate and fire_schedules, as backoff_worker and backoff_admin have.
Errors: 22023 for p_for or p_every outside their ranges (and as reap, rotate and fire_schedules raise it); 2D000 when called inside a transaction block.
Example:
CALL backoff.maintain(p_for => ''0 seconds'');';
