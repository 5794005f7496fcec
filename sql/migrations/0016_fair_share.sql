-- Fair share: a fair kind's jobs are claimed in turn across their concurrency keys.
-- Each job of a fair kind carries a tag (fair_tag), written when it is enqueued: the
-- smallest tag pending at its priority (where claims are), or just past its key's latest
-- pending tag at that priority, whichever is later; a key's successive jobs are spaced
-- by 1/weight. Claims take the smallest tags first, so a key with one job waits at most
-- one turn of every key with due work, however deep another's backlog, and a claim
-- reads one index range whatever the number of keys.
-- Every change here is a column with a constant default or none (no rewrite), a new
-- table, or a partial index that no existing job enters.
ALTER TABLE {kinds} ADD COLUMN fair boolean NOT NULL DEFAULT false;
ALTER TABLE {jobs} ADD COLUMN fair_tag float8;

-- Each key's weight in a fair kind (a key without a row weighs 1). Finite and positive:
-- the upper bound also keeps NaN out, which PostgreSQL sorts above every number.
CREATE TABLE {fair_weights} (
    kind   text   NOT NULL,
    key    text   NOT NULL,
    weight float8 NOT NULL,
    CONSTRAINT {fair_weights_pkey} PRIMARY KEY (kind, key),
    CONSTRAINT {fair_weights_check} CHECK (weight > 0 AND weight <= 1000000)
);

-- Fair claims: a kind's tagged pending jobs in claim order (priority first, then tag);
-- its first entry at a priority is where claims are, which each enqueue reads.
-- visible_at is a key column so that a claim's "due now" test is checked on the index
-- entry, without visiting the row of a job that is not due yet.
CREATE INDEX {fair_claim_idx} ON {jobs} (kind, priority DESC, fair_tag, visible_at, id)
    WHERE status = 'pending' AND fair_tag IS NOT NULL;

-- A key's latest pending tag at a priority, read by each enqueue of a fair kind. The key
-- leads, so that no statement reading a whole kind's range could walk it instead.
CREATE INDEX {fair_key_idx} ON {jobs} (concurrency_key, kind, priority, fair_tag)
    WHERE status = 'pending' AND fair_tag IS NOT NULL;
