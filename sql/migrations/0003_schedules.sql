-- Schedules: one row per named schedule, the bookkeeping that makes each slot fire once.
-- Workers upsert the rows of the schedules in their code at start and fire a slot by
-- moving next_slot on in the statement that inserts the slot's jobs.
CREATE TABLE {schedules} (
    name         text        NOT NULL,
    kind         text        NOT NULL,
    expression   text        NOT NULL,
    zone         text        NOT NULL,
    payload      jsonb       NOT NULL DEFAULT '{{}}'::jsonb,
    with_slot    boolean     NOT NULL DEFAULT false,
    priority     smallint    NOT NULL DEFAULT 0,
    max_attempts integer     NOT NULL DEFAULT 5,
    catch_up     text        NOT NULL,
    max_catch_up integer     NOT NULL,
    fingerprint  text        NOT NULL,
    active       boolean     NOT NULL DEFAULT true,
    last_slot    timestamptz,
    next_slot    timestamptz NOT NULL,
    fired_at     timestamptz,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT {schedules_pkey} PRIMARY KEY (name)
);
