-- Jobs, their append-only journal, and the indexes the store's queries rely on.
-- Applied once per prefix under the prefix's advisory lock.
CREATE TABLE {jobs} (
    id               uuid        NOT NULL,
    kind             text        NOT NULL,
    payload          jsonb       NOT NULL DEFAULT '{{}}'::jsonb,
    priority         smallint    NOT NULL DEFAULT 0,
    status           text        NOT NULL DEFAULT 'pending',
    created_at       timestamptz NOT NULL DEFAULT now(),
    visible_at       timestamptz NOT NULL DEFAULT now(),
    run_count        integer     NOT NULL DEFAULT 0,
    failure_count    integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL DEFAULT 5,
    carry            jsonb,
    dedup_key        text,
    claimed_by       text,
    claim_expires_at timestamptz,
    finished_at      timestamptz,
    CONSTRAINT {jobs_pkey} PRIMARY KEY (id),
    CONSTRAINT {jobs_status_check} CHECK (
        status IN ('pending', 'claimed', 'completed', 'dead', 'cancelled')
        AND (finished_at IS NOT NULL) = (status IN ('completed', 'dead', 'cancelled'))
    )
) WITH (fillfactor = 70);

-- Claim: one kind's pending jobs in claim order, so a claim is a short index scan
-- whatever else is pending. Leases are not indexed here, so heartbeats stay HOT.
CREATE INDEX {claim_idx} ON {jobs} (kind, priority DESC, visible_at, id)
    WHERE status = 'pending';

-- Reaper: only claimed rows (as many as the workers' slots), sorted by expiry after the
-- scan. claim_expires_at itself is not indexed: heartbeats rewrite it, and an indexed
-- column would stop those updates from being HOT (each would add index entries).
CREATE INDEX {stale_idx} ON {jobs} (claimed_by) WHERE status = 'claimed';

-- History keyset pages, newest first.
CREATE INDEX {history_idx} ON {jobs} (created_at DESC, id DESC);

-- Cleanup of terminal jobs by age.
CREATE INDEX {finished_idx} ON {jobs} (finished_at) WHERE finished_at IS NOT NULL;

-- At most one pending job per (kind, dedup_key): racing enqueues merge, never double.
CREATE UNIQUE INDEX {dedup_idx} ON {jobs} (kind, dedup_key)
    WHERE status = 'pending' AND dedup_key IS NOT NULL;

CREATE TABLE {journal} (
    id          bigint      GENERATED ALWAYS AS IDENTITY (SEQUENCE NAME {journal_id_seq}),
    job_id      uuid        NOT NULL,
    kind        text        NOT NULL,
    run_no      integer     NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    outcome     text        NOT NULL,
    note        text,
    attachment  jsonb,
    CONSTRAINT {journal_pkey} PRIMARY KEY (id),
    CONSTRAINT {journal_job_fkey} FOREIGN KEY (job_id) REFERENCES {jobs} (id) ON DELETE CASCADE,
    CONSTRAINT {journal_outcome_check} CHECK (outcome IN (
        'completed', 'retried', 'paused', 'dead', 'released',
        'recovered', 'merged', 'cancelled', 'requeued'))
);

CREATE INDEX {journal_job_idx} ON {journal} (job_id, id);
