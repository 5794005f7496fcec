-- Durable handlers: what a job's runs recorded (steps), the signals sent to it, and what
-- it waits for. New tables only: a job that never records a step has no row in any of
-- them, and enqueue, claim and settle never read them. Deleting a job deletes its rows
-- (ON DELETE CASCADE, served by each table's index on job_id).

-- One row per recorded step: its name (unique within the job), its place in the order
-- the handler reached it (seq, from 1; a replay must reach the same names in the same
-- order), the run that recorded it and its JSON result.
CREATE TABLE {steps} (
    job_id      uuid        NOT NULL,
    name        text        NOT NULL,
    seq         integer     NOT NULL,
    run_no      integer     NOT NULL,
    result      jsonb,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT {steps_pkey} PRIMARY KEY (job_id, name),
    CONSTRAINT {steps_seq_key} UNIQUE (job_id, seq),
    CONSTRAINT {steps_job_fkey} FOREIGN KEY (job_id) REFERENCES {jobs} (id) ON DELETE CASCADE
);

-- Signals, kept in the order they were sent; a wait returns the first of its name.
CREATE TABLE {signals} (
    id      bigint      GENERATED ALWAYS AS IDENTITY,
    job_id  uuid        NOT NULL,
    name    text        NOT NULL,
    payload jsonb,
    sent_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT {signals_pkey} PRIMARY KEY (id),
    CONSTRAINT {signals_job_fkey} FOREIGN KEY (job_id) REFERENCES {jobs} (id) ON DELETE CASCADE
);
CREATE INDEX {signals_job_idx} ON {signals} (job_id, name, id);

-- What a job's last suspended run waits for: a sleep's end, a signal, or another job,
-- until a time. run_no is that run's: the wait is current while the job is pending with
-- this run number.
CREATE TABLE {waits} (
    job_id uuid        NOT NULL,
    run_no integer     NOT NULL,
    what   text        NOT NULL CHECK (what IN ('sleep', 'signal', 'job')),
    name   text        NOT NULL,
    until  timestamptz,
    since  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT {waits_pkey} PRIMARY KEY (job_id),
    CONSTRAINT {waits_job_fkey} FOREIGN KEY (job_id) REFERENCES {jobs} (id) ON DELETE CASCADE
);

-- A signal leaves a journal row of its own. The check is only widened, so every existing
-- row passes; validating it reads the journal once (as 0010's did).
ALTER DOMAIN {journal_outcome} DROP CONSTRAINT {journal_outcome_values};
ALTER DOMAIN {journal_outcome} ADD CONSTRAINT {journal_outcome_values} CHECK (VALUE IN (
    'completed', 'retried', 'paused', 'dead', 'released',
    'recovered', 'merged', 'cancelled', 'requeued', 'signalled')) NOT VALID;
ALTER DOMAIN {journal_outcome} VALIDATE CONSTRAINT {journal_outcome_values};
