-- backoff._now(p_now): the time a function works at (ADR 0035,
-- docs/adr/0035-time-is-not-a-privilege.md). Private; every public function
-- that takes p_now starts with p_now := backoff._now(p_now).
--   NULL or now()  -> now(), the transaction's clock, without reading any
--                     table (the hot path of every client without a clock);
--   not finite, or outside years 1 to 9999 (UTC) -> 22023 naming it;
--   otherwise      -> p_now, when backoff.settings.time_injection is on, or
--                     the caller is a member of backoff_admin, or it lies
--                     behind now() by at most max_clock_skew;
--                     now(), when it lies ahead of now() by at most
--                     max_clock_skew (docs/adr/0057): a host clock a
--                     little fast still works, but its lead is no licence
--                     to reap a live lease, claim or acquire a job before
--                     it is due, end a breaker's cooldown or refill a
--                     bucket early, nor to store a time (a bucket's
--                     refilled_at) that others are then measured from;
--                     else 22023.
-- A clock behind now() only delays what the caller decides, so it is kept
-- (records and late decisions are the caller's own, as before).
-- The caller is the role the session acts as: the SET ROLE role, else the
-- login (session_user). current_user cannot say it: the public functions
-- are SECURITY DEFINER, so inside them it is always backoff_owner. A missing
-- settings row means the defaults (5 minutes, no injection).
--
-- Two functions: backoff._now is the hot path as an inlinable SQL
-- expression (a PL/pgSQL caller's `p_now := backoff._now(p_now)` then costs
-- no function call when p_now is NULL or now(), the common case), and
-- backoff._injected_now (created first: an SQL body is checked when it is
-- created) checks every other value.
CREATE OR REPLACE FUNCTION backoff._injected_now(p_now timestamptz)
RETURNS timestamptz
LANGUAGE plpgsql
STABLE
AS $$
DECLARE
    v_skew      interval;
    v_injection boolean;
    v_role      text;
BEGIN
    IF NOT (p_now >= '0001-01-01 00:00:00+00'::timestamptz AND p_now < '10000-01-01 00:00:00+00'::timestamptz) THEN
        RAISE EXCEPTION 'now must be a finite time between years 1 and 9999, got "%"', p_now
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    SELECT s.max_clock_skew, s.time_injection INTO v_skew, v_injection FROM backoff.settings AS s;
    IF v_injection THEN
        RETURN p_now;
    END IF;
    v_skew := coalesce(v_skew, interval '5 minutes');
    -- Behind the clock, within the skew: no role to look up.
    IF p_now >= pg_catalog.now() - v_skew AND p_now <= pg_catalog.now() THEN
        RETURN p_now;
    END IF;
    v_role := coalesce(NULLIF(pg_catalog.current_setting('role'), 'none'), session_user::text);
    IF pg_catalog.pg_has_role(v_role, 'backoff_admin', 'MEMBER') THEN
        RETURN p_now;
    END IF;
    -- Ahead of the clock, within the skew: the database's clock, so that
    -- no decision takes effect early (docs/adr/0057).
    IF p_now > pg_catalog.now() AND p_now <= pg_catalog.now() + v_skew THEN
        RETURN pg_catalog.now();
    END IF;
    RAISE EXCEPTION 'now "%" is further than max_clock_skew "%" from the database clock "%"', p_now, v_skew, pg_catalog.now()
        USING ERRCODE = 'invalid_parameter_value',
              HINT = 'pass NULL for the database clock; only backoff_admin may inject time, unless backoff.settings.time_injection is on';
END
$$;

CREATE OR REPLACE FUNCTION backoff._now(p_now timestamptz)
RETURNS timestamptz
LANGUAGE sql
STABLE
AS $$
    SELECT CASE WHEN p_now IS NULL OR p_now = pg_catalog.now() THEN pg_catalog.now()
                ELSE backoff._injected_now(p_now) END
$$;
