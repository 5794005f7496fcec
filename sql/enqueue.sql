-- Inserts one job and notifies the channel in the same statement, so the wakeup is
-- delivered exactly when the row commits (and never on rollback). The caller chose the
-- id; pg_notify in the select list (not a lateral join) keeps the plan short: planning
-- is a third of this statement's server time when it is not prepared.
-- Parameters: id, kind, payload (JSON text), priority, delay (s) | at, max_attempts.
-- Returns: one row (pg_notify's void).
WITH inserted AS (
    INSERT INTO {jobs} {new_job}
    RETURNING kind
)
SELECT pg_notify({channel}, inserted.kind) FROM inserted
