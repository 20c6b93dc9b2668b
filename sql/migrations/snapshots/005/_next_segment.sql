-- backoff._next_segment(current, max): the live segment backoff.rotate
-- switches to from the current one (docs/adr/0061, docs/adr/0082), or NULL
-- when there is none, with a note saying why or what was done.
--
-- The next segment must be empty on disk (truncated, or never written):
-- one that holds only dead row versions, its truncate held off by a
-- transaction that read it, would make every claim walk them as long as
-- that transaction lasts. Among those, the first after the current one in
-- the order of their numbers, so that in a ring of three each segment has
-- two rotations to be truncated. When none is empty, a new segment is
-- added, up to p_max; past that, the first segment after the current one
-- that holds no row is taken as before segments were added (its dead
-- versions are walked until vacuum or a truncate removes them).
-- A segment that holds rows is never switched to: rows of a segment that
-- is not current are moved out by rotate, and a segment with rows left is
-- not yet empty.
CREATE OR REPLACE FUNCTION backoff._next_segment(p_current smallint, p_max integer)
RETURNS TABLE (segment smallint, added boolean, note text)
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_ring  smallint[];
    v_seg   smallint;
    v_timeout text;
BEGIN
    added := false;
    -- The other segments, the ones after the current first.
    v_ring := ARRAY(SELECT s.segment FROM backoff.segments AS s
                    WHERE s.segment <> p_current
                    ORDER BY s.segment <= p_current, s.segment);
    FOREACH v_seg IN ARRAY v_ring LOOP
        IF pg_catalog.pg_relation_size(pg_catalog.format('backoff.jobs_live_%s', v_seg)::pg_catalog.regclass) = 0 THEN
            segment := v_seg;
            RETURN NEXT;
            RETURN;
        END IF;
    END LOOP;

    IF cardinality(v_ring) + 1 < p_max THEN
        -- ATTACH waits for no reader or writer; only a schema change or a
        -- manual ANALYZE of backoff.jobs holds a lock it waits for, and
        -- while it waits, statements on backoff.jobs queue behind it.
        v_timeout := pg_catalog.current_setting('lock_timeout');
        BEGIN
            PERFORM pg_catalog.set_config('lock_timeout', '50ms', true);
            segment := backoff._add_segment();
            PERFORM pg_catalog.set_config('lock_timeout', v_timeout, true);
            added := true;
            note := pg_catalog.format('segment %s added: no segment was empty on disk (a transaction that read backoff.jobs holds the others until it ends)',
                                      segment);
            RETURN NEXT;
            RETURN;
        EXCEPTION WHEN lock_not_available THEN
            note := 'no segment was empty on disk, and adding one did not get its lock on backoff.jobs within 50 ms';
        END;
    ELSE
        note := pg_catalog.format('no segment was empty on disk, and there are %s, the most rotate adds', cardinality(v_ring) + 1);
    END IF;

    -- Past the limit: the first that holds no row.
    FOREACH v_seg IN ARRAY v_ring LOOP
        IF NOT EXISTS (SELECT FROM backoff.jobs AS j WHERE j.segment = v_seg) THEN
            segment := v_seg;
            note := note || pg_catalog.format(': switched to segment %s, which holds only dead rows', v_seg);
            RETURN NEXT;
            RETURN;
        END IF;
    END LOOP;
    note := note || ': every other segment still holds jobs';
    RETURN NEXT;
END
$$;
