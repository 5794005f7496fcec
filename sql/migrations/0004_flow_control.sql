-- Flow control: each kind's pause flag and declared limits, and a job's concurrency key.
-- A kind's row is written when a worker declares its limits at start (the latest
-- declaration wins; declared_by and declared_at say whose it is) and when an operator
-- pauses or resumes it. Claims of a kind with limits lock its row, so concurrent claimers
-- of one kind take turns and each sees the claims committed before it.
CREATE TABLE {kinds} (
    kind            text        NOT NULL,
    paused          boolean     NOT NULL DEFAULT false,
    paused_at       timestamptz,
    concurrency     integer,
    key_concurrency integer,
    rate_limit      integer,
    rate_window     float8,
    -- When each run of the current rate window started (claims), oldest first.
    rate_starts     timestamptz[] NOT NULL DEFAULT '{{}}',
    declared_by     text,
    declared_at     timestamptz,
    CONSTRAINT {kinds_pkey} PRIMARY KEY (kind),
    CONSTRAINT {kinds_limits_check} CHECK (
        (concurrency IS NULL OR concurrency >= 1)
        AND (key_concurrency IS NULL OR key_concurrency >= 1)
        AND (rate_limit IS NULL) = (rate_window IS NULL)
        AND (rate_limit IS NULL OR (rate_limit >= 1 AND rate_window > 0))
    )
);

-- A nullable column without a default: adding it rewrites nothing.
ALTER TABLE {jobs} ADD COLUMN concurrency_key text;

-- Keyed claims: a kind's pending keyed jobs by key, in claim order within each key, so a
-- claim walks the distinct keys (a loose index scan) and reads each free key's first jobs.
-- Partial on keyed rows: jobs without a key never write an entry here.
CREATE INDEX {key_claim_idx} ON {jobs} (kind, concurrency_key, priority DESC, visible_at, id)
    WHERE status = 'pending' AND concurrency_key IS NOT NULL;

-- Running jobs per key, counted by every keyed claim.
CREATE INDEX {key_running_idx} ON {jobs} (kind, concurrency_key)
    WHERE status = 'claimed' AND concurrency_key IS NOT NULL;
