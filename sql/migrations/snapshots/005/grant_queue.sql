-- backoff.grant_queue(role, queue, privilege): allow p_role to act on
-- p_queue with p_privilege ('produce': enqueue; 'work': claim, acquire,
-- complete, complete_many, fail, heartbeat, snooze, reap). p_queue is a
-- queue name or a prefix ending in '*' ('mail.*'; '*' alone is every
-- queue). A role with at least one grant (its own or one of a role it is a
-- member of) may act only on the queues granted to it; a role without
-- grants acts on no queue when backoff.settings.require_queue_grants is on,
-- on every queue when it is off (
-- docs/adr/0038-queue-scoped-privileges.md, docs/adr/0058). The grant is stored with its
-- LIKE pattern, so that the check is one LIKE ANY per call.
CREATE OR REPLACE FUNCTION backoff.grant_queue(
    p_role      text,
    p_queue     text,
    p_privilege text
)
RETURNS boolean
LANGUAGE plpgsql
VOLATILE
SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_role    oid;
    v_pattern text;
BEGIN
    v_role := backoff._grant_role('grant_queue', p_role, p_privilege);
    p_queue := backoff._check_name('queue', p_queue);
    -- The prefix of 'mail.*' is 'mail.', matched literally.
    v_pattern := pg_catalog.replace(pg_catalog.replace(pg_catalog.replace(
                     CASE WHEN pg_catalog.right(p_queue, 1) = '*' THEN pg_catalog.left(p_queue, -1) ELSE p_queue END,
                     '\', '\\'), '%', '\%'), '_', '\_')
                 || CASE WHEN pg_catalog.right(p_queue, 1) = '*' THEN '%' ELSE '' END;
    INSERT INTO backoff.queue_grants (role, queue, privilege, pattern)
    VALUES (v_role, p_queue, p_privilege, v_pattern)
    ON CONFLICT DO NOTHING;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.grant_queue(text, text, text) IS
'Allow role p_role (and its members) to act on queue p_queue with p_privilege: ''produce'' (enqueue) or ''work'' (claim, acquire, complete, complete_many, fail, heartbeat, snooze; reap settles only the granted queues'' expired leases). p_queue is a queue name or a prefix ending in * (''mail.*''; ''*'' alone is every queue). A role that has at least one grant, directly or through a role it belongs to, may act only on its granted queues: anything else is refused with 42501 naming the queue, and it reads only the jobs of its ''work'' queues from backoff.jobs. A worker or producer without grants acts on no queue when backoff.settings.require_queue_grants is on (new installs), on every queue when it is off. By id, a job of a queue the caller may not work on is answered as a missing one (BK001). The scope follows the login (session_user): SET ROLE cannot widen it; a connection whose login has no grants takes the scope of the role it SET ROLEs to. Superusers are never scoped. Returns true when the grant is new, false when it existed. Admin only.
Errors: 22023 for an unknown role, a privilege other than produce or work, a queue that is not 1 to 128 bytes without control or format characters.
Example:
SELECT backoff.grant_queue(''backoff_worker'', ''mail.*'', ''work'');
SELECT role::regrole, queue, privilege FROM backoff.queue_grants ORDER BY 1, 2, 3;';
