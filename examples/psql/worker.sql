-- A whole worker loop in psql, with pgbackoff's SQL functions alone.
--
--   psql -X -v ON_ERROR_STOP=1 -f examples/psql/worker.sql "$DATABASE_URL"
--
-- It enqueues nine jobs into the queue "psql-demo"; every third job fails
-- once (a transient error, retried at once) and succeeds on its second
-- attempt. worker_step.sql claims one job, settles it, and includes itself
-- again until the queue is empty. Ends by printing the jobs' final state.
\set ON_ERROR_STOP on
\set QUIET on
\pset footer off

SELECT count(backoff.enqueue('psql-demo', jsonb_build_object('n', n, 'fail_once', n % 3 = 0)))
    AS enqueued
FROM generate_series(1, 9) AS n \gset
\echo enqueued :enqueued jobs

\ir worker_step.sql

SELECT id, status, attempts, coalesce(last_error, '') AS last_error
FROM backoff.jobs WHERE queue = 'psql-demo' ORDER BY id;
