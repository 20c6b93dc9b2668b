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
