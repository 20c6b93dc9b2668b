-- Changes since 0.1.0: the schema changes below, then the working copy of
-- every function (snapshot "unreleased", sql/functions) with its
-- privileges (privileges.sql). Migration 005's functions stay frozen in
-- snapshots/005.
--
-- Each section below belongs to one change; its down counterpart is in the
-- same order, reversed, after the marker.

-- == Schema changes (one section per change) ==

-- == Dependencies settled in place (docs/adr/0087) ==
-- A parent's completion sets the state of each of its edges and counts
-- down its children's blockers: with room left in their pages those
-- UPDATEs are heap-only (neither table indexes the columns they set), so
-- they write no index entry. Existing pages keep their fill until rewritten.
ALTER TABLE backoff.job_dependencies SET (fillfactor = 50);
ALTER TABLE backoff.job_blockers SET (fillfactor = 50);

-- == Blocked jobs released as they move (docs/adr/0087) ==
-- backoff._move_to_current_segment takes p_release: the old signature goes,
-- so that calls do not become ambiguous.
DROP FUNCTION backoff._move_to_current_segment(bigint[]);

-- == Blocked jobs counted by the operator's reads (docs/adr/0090) ==
-- backoff.stats and backoff.overview return a last column, blocked: a
-- return type cannot be replaced in place.
DROP FUNCTION backoff.stats(interval, timestamptz);
DROP FUNCTION backoff.overview(timestamptz, integer);

-- == Awaiting a job's output (docs/workflows.md) ==
-- Who awaits which job (backoff.await_job): the call that finishes a job
-- notifies channel backoff_finished for it, and deletes its rows. Empty
-- unless the feature is used, so that the finishing calls' probe of it
-- costs next to nothing.
CREATE TABLE backoff.job_awaiters (
    job_id     bigint NOT NULL,
    awaiter    text NOT NULL,
    expires_at timestamptz NOT NULL,
    CONSTRAINT job_awaiters_pkey PRIMARY KEY (job_id, awaiter)
);
ALTER TABLE backoff.job_awaiters OWNER TO backoff_owner;
REVOKE ALL ON backoff.job_awaiters FROM PUBLIC;
GRANT SELECT ON backoff.job_awaiters TO backoff_admin;

-- == Queues moved between shards (docs/adr/0092) ==
-- backoffctl shards move marks a queue 'out' on the shard it leaves (which
-- then refuses its enqueues and claims; backoff._moved_away) and 'in' on
-- the shard it goes to (which holds the dedupe keys of the other shard's
-- jobs meanwhile); peer is the other shard. A job copied to this shard gets
-- a new id: moved_jobs maps the id it had there (from_id) to it, which
-- makes the copy idempotent.
CREATE TABLE backoff.queue_moves (
    queue      text PRIMARY KEY,
    direction  text NOT NULL CONSTRAINT queue_moves_direction_check CHECK (direction IN ('in', 'out')),
    peer       integer NOT NULL CONSTRAINT queue_moves_peer_check CHECK (peer >= 0),
    -- Raised by every move of the queue: of two shards marked 'in' (an
    -- abort interrupted between its two marks), the higher one is the
    -- move under way.
    generation bigint NOT NULL,
    since      timestamptz NOT NULL
);
CREATE TABLE backoff.moved_jobs (
    from_id  bigint PRIMARY KEY,
    job_id   bigint NOT NULL,
    queue    text NOT NULL,
    moved_at timestamptz NOT NULL
);
-- prune deletes the map of the jobs it deletes.
CREATE INDEX moved_jobs_job_idx ON backoff.moved_jobs (job_id);
ALTER TABLE backoff.queue_moves OWNER TO backoff_owner;
ALTER TABLE backoff.moved_jobs OWNER TO backoff_owner;
REVOKE ALL ON backoff.queue_moves, backoff.moved_jobs FROM PUBLIC;
GRANT SELECT ON backoff.queue_moves, backoff.moved_jobs TO backoff_admin;

-- (end of schema changes)

{{ install_snapshot "unreleased" }}

---- create above / drop below ----

-- Back to version 5: drop every function and procedure but the two that a
-- column default and the row-level security policies call (version 5 has
-- them with the same signatures; its install replaces them), so that none
-- added since is left behind, undo the schema changes, then install
-- migration 005's functions and privileges. First the triggers that call
-- one of them.
DROP TRIGGER queues_held_on_insert ON backoff.queues;
DROP TRIGGER queues_held_on_update ON backoff.queues;
DO $$
DECLARE
    v_fn pg_catalog.regprocedure;
BEGIN
    FOR v_fn IN
        SELECT p.oid::pg_catalog.regprocedure
        FROM pg_catalog.pg_proc AS p
        WHERE p.pronamespace = 'backoff'::pg_catalog.regnamespace
          AND p.proname NOT IN ('_current_segment', '_visible_queues')
    LOOP
        EXECUTE pg_catalog.format('DROP ROUTINE %s', v_fn);
    END LOOP;
END
$$;

-- == Queues moved between shards ==
DROP TABLE backoff.moved_jobs;
DROP TABLE backoff.queue_moves;

-- == Awaiting a job's output ==
DROP TABLE backoff.job_awaiters;

-- == Dependencies settled in place ==
ALTER TABLE backoff.job_blockers RESET (fillfactor);
ALTER TABLE backoff.job_dependencies RESET (fillfactor);

-- (end of undo)

{{ install_snapshot "005" }}
