-- name: operator_actions_record
-- Append one operator action to the audit trail (who, what, on what, why, what came of it), in the repair's own transaction.
INSERT INTO __schema__.operator_actions (actor, action, target, reason, outcome, changed, created_at)
VALUES (%(actor)s::text, %(action)s::text, %(target)s::text, %(reason)s::text, %(outcome)s::text,
        %(changed)s::boolean, now())
RETURNING id;
