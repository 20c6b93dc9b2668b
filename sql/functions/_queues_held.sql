-- backoff._queues_held(): whether some queue has a control that can hold
-- its claims back (backoff._holds_claims: paused, a rate, or a circuit
-- breaker). A constant, published as backoff._current_segment is: an
-- IMMUTABLE function whose body is the answer, folded when a statement is
-- planned, so that while no queue has a control, claim's filter on
-- backoff.queues and the half-open breaker probes of complete,
-- complete_many and fail are planned away: their scans are neither started
-- nor run (about 50,000 instructions a claim and 20,000 a completion,
-- docs/adr/0094). Replacing it invalidates every cached plan that folded
-- it, in every session; a transaction sees the new answer from its next
-- statement that locks a table it had not locked, and at the latest from
-- its next transaction. Private.
--
-- Published true in the transaction of the statement that gives a queue a
-- control, whoever writes the row (a trigger on backoff.queues:
-- backoff.pause_queue, backoffctl config, an administrator's own UPDATE);
-- published false only by backoff._sync_queues_held at READ COMMITTED,
-- which also repairs the answer after a write that fired no trigger (a
-- restore, session_replication_role = replica). Every publisher first
-- takes SHARE UPDATE EXCLUSIVE on backoff.queues: publishers go one at a
-- time, and acquiring a lock the transaction did not hold makes the
-- backend read the catalog changes committed meanwhile, so that it
-- replaces the function's current version and reads its current answer.

-- backoff._holds_claims(queue row): the one rule for "this queue has a
-- control": paused, a rate, or a circuit breaker (breaker_failures).
CREATE OR REPLACE FUNCTION backoff._holds_claims(p_queue backoff.queues)
RETURNS boolean
LANGUAGE sql
IMMUTABLE PARALLEL SAFE
AS $$
    SELECT p_queue.paused OR p_queue.rate IS NOT NULL OR p_queue.breaker_failures IS NOT NULL
$$;

CREATE OR REPLACE FUNCTION backoff._publish_queues_held(p_held boolean)
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF p_held IS NULL THEN
        RAISE EXCEPTION 'queues held must be true or false, got NULL'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM backoff._publish_constant('_queues_held', 'boolean', CASE WHEN p_held THEN 'SELECT true' ELSE 'SELECT false' END);
END
$$;

-- backoff._sync_queues_held(): publish what backoff.queues says now, when
-- the published answer differs. False is published only at READ
-- COMMITTED, where the statement that reads backoff.queues after the lock
-- has a snapshot newer than every publisher that went before; at another
-- isolation level a snapshot may predate a control, so only true is
-- published. Called by backoff.rotate and at install. Private.
CREATE OR REPLACE FUNCTION backoff._sync_queues_held()
RETURNS void
LANGUAGE plpgsql
VOLATILE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_held boolean;
BEGIN
    v_held := EXISTS (SELECT FROM backoff.queues AS q WHERE backoff._holds_claims(q));
    IF v_held IS NOT DISTINCT FROM backoff._queues_held() THEN
        RETURN;
    END IF;
    IF NOT v_held AND pg_catalog.current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN;
    END IF;
    LOCK TABLE backoff.queues IN SHARE UPDATE EXCLUSIVE MODE;
    v_held := EXISTS (SELECT FROM backoff.queues AS q WHERE backoff._holds_claims(q));
    IF v_held IS DISTINCT FROM backoff._queues_held() THEN
        PERFORM backoff._publish_queues_held(v_held);
    END IF;
END
$$;

-- backoff._queues_written(): the trigger of a statement that inserted or
-- updated rows of backoff.queues (new_queues: those rows as written).
-- Publishes true when one of them has a control and the published answer
-- is false. A definer function: the writer may lack the privilege to lock
-- the table in that mode or to replace the function. Private.
CREATE OR REPLACE FUNCTION backoff._queues_written()
RETURNS trigger
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM new_queues AS q WHERE backoff._holds_claims(q)) THEN
        LOCK TABLE backoff.queues IN SHARE UPDATE EXCLUSIVE MODE;
        IF NOT backoff._queues_held() THEN
            PERFORM backoff._publish_queues_held(true);
        END IF;
    END IF;
    RETURN NULL;
END
$$;

-- A trigger with a transition table takes one event.
CREATE OR REPLACE TRIGGER queues_held_on_insert
    AFTER INSERT ON backoff.queues
    REFERENCING NEW TABLE AS new_queues
    FOR EACH STATEMENT EXECUTE FUNCTION backoff._queues_written();
CREATE OR REPLACE TRIGGER queues_held_on_update
    AFTER UPDATE ON backoff.queues
    REFERENCING NEW TABLE AS new_queues
    FOR EACH STATEMENT EXECUTE FUNCTION backoff._queues_written();

SELECT backoff._publish_queues_held(EXISTS (SELECT FROM backoff.queues AS q WHERE backoff._holds_claims(q)));
