-- Privileges of the functions (and the procedure, backoff.maintain)
-- installed with this file (docs/adr/0017, docs/adr/0038): owner
-- backoff_owner, nothing for PUBLIC, EXECUTE granted by name so that every
-- overload is covered. It runs last in install.sql,
-- so a snapshot carries the grants that go with its functions.
DO $$
DECLARE
    v_fn   record;
    v_role text;
BEGIN
    FOR v_fn IN
        SELECT p.oid::pg_catalog.regprocedure AS sig, p.proname::text AS name
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'backoff'::pg_catalog.regnamespace
    LOOP
        EXECUTE pg_catalog.format('ALTER ROUTINE %s OWNER TO backoff_owner', v_fn.sig);
        EXECUTE pg_catalog.format('REVOKE ALL ON ROUTINE %s FROM PUBLIC', v_fn.sig);
        FOREACH v_role IN ARRAY ARRAY['backoff_producer', 'backoff_worker', 'backoff_admin'] LOOP
            IF v_fn.name = 'schema_version'
               OR (v_role = 'backoff_producer' AND v_fn.name IN ('enqueue', 'enqueue_graph', 'queue_state', 'unfinished_job', 'job_output',
                                                                 'await_job', 'stop_awaiting'))
               OR (v_role = 'backoff_worker' AND v_fn.name IN (
                       'claim', 'acquire', 'complete', 'complete_many', 'fail', 'heartbeat', 'snooze', 'reap', 'rotate', 'maintain',
                       'retry_delay', 'compute_delay', 'schedule', 'calculate_step_next_retry_time', 'job_policy',
                       'wait_for_jobs', 'stop_waiting', 'next_work', 'error_signature', 'queue_state', 'job', 'unfinished_job', 'queue_list',
                       'fire_schedules', 'schedule_fires', 'policy_list', 'job_output', 'parent_outputs', 'await_job', 'stop_awaiting',
                       -- private, for the row-level security policy of backoff.jobs
                       '_visible_queues'))
               OR (v_role = 'backoff_admin' AND (v_fn.name NOT LIKE '\_%'
                                                 -- private, the DEFAULT of backoff.jobs.segment
                                                 OR v_fn.name = '_current_segment'
                                                 -- private, for the mover of a queue between shards
                                                 OR v_fn.name LIKE '\_transfer\_%')) THEN
                EXECUTE pg_catalog.format('GRANT EXECUTE ON ROUTINE %s TO %I', v_fn.sig, v_role);
            END IF;
        END LOOP;
    END LOOP;
END
$$;
