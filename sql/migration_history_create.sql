-- Creates the prefix's migration history table if it is missing.
-- Parameters: none. Returns: nothing. Runs under the prefix's advisory lock.
CREATE TABLE IF NOT EXISTS {schema_history} (
    version    integer     NOT NULL,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT {schema_history_pkey} PRIMARY KEY (version)
)
