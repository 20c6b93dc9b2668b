-- backoff.revoke_queue(role, queue, privilege): remove one grant of
-- backoff.grant_queue, exactly as it was written (a prefix grant is revoked
-- by the same 'mail.*', not queue by queue). Revoking a role's last grant
-- leaves it without grants: it then acts on no queue with
-- require_queue_grants on, on every queue with it off
-- (docs/adr/0038-queue-scoped-privileges.md, docs/adr/0058).
CREATE OR REPLACE FUNCTION backoff.revoke_queue(
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
    v_role oid;
BEGIN
    v_role := backoff._grant_role('revoke_queue', p_role, p_privilege);
    DELETE FROM backoff.queue_grants AS g
    WHERE g.role = v_role AND g.queue = p_queue AND g.privilege = p_privilege;
    RETURN FOUND;
END
$$;

COMMENT ON FUNCTION backoff.revoke_queue(text, text, text) IS
'Remove the grant (p_role, p_queue, p_privilege) written by backoff.grant_queue, spelled as it was granted (a prefix grant ''mail.*'' is revoked as ''mail.*''). Returns true when a grant was removed, false when there was none. Revoking a role''s last grant leaves it as a role that was never granted one: it may then act on no queue when backoff.settings.require_queue_grants is on, on every queue when it is off. Admin only.
Errors: 22023 for an unknown role, a privilege other than produce or work.
Example:
SELECT backoff.grant_queue(''backoff_worker'', ''mail.*'', ''work'');
SELECT backoff.revoke_queue(''backoff_worker'', ''mail.*'', ''work'');';
