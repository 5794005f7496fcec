-- Where a claim may start reading: each pending job records the transaction that made
-- it pending (or moved it in claim order), pended_xid. A claim remembers the first
-- pending job it saw with the snapshot it saw it in (its floor); the next claim reads
-- the claim index from that job on, plus the pending jobs whose pended_xid that snapshot
-- could not see, which a small index finds. Every other pending job lies at or past the
-- floor, so the index entries of the jobs claimed before it are not read again, even
-- while a held-back xmin horizon keeps vacuum from removing them.
-- The column has no default value stored in existing rows (no rewrite): a NULL is a job
-- made pending before this migration, which every later snapshot sees.
ALTER TABLE {jobs} ADD COLUMN pended_xid xid8;
ALTER TABLE {jobs} ALTER COLUMN pended_xid SET DEFAULT pg_current_xact_id();

-- Pending or waiting, a predicate the claim index's does not imply: a query for the jobs
-- pended since a floor cannot be planned on the claim index (sql/fragments/pending_levels.sql).
CREATE INDEX {pended_idx} ON {jobs} (kind, pended_xid) WHERE status IN ('pending', 'waiting');

-- Any write that makes a job pending or moves a pending job in claim order (priority,
-- visible_at, id) stamps its transaction: a retry, a release, a recovery, a requeue, a
-- workflow child whose parents finished, a durable wake, an insert that named the column.
-- The WHEN conditions are checked without calling the function, so a claim or a
-- settlement that makes no job pending pays nothing.
CREATE FUNCTION {pended_stamp}() RETURNS trigger LANGUAGE plpgsql AS $body$
BEGIN
    NEW.pended_xid := pg_current_xact_id();
    RETURN NEW;
END
$body$;

CREATE TRIGGER {pended_on_insert} BEFORE INSERT ON {jobs} FOR EACH ROW
    WHEN (NEW.pended_xid IS DISTINCT FROM pg_current_xact_id())
    EXECUTE FUNCTION {pended_stamp}();

CREATE TRIGGER {pended_on_update} BEFORE UPDATE ON {jobs} FOR EACH ROW
    WHEN (NEW.status = 'pending'
          AND NEW.pended_xid IS DISTINCT FROM pg_current_xact_id()
          AND (OLD.status <> 'pending'
               OR (OLD.priority, OLD.visible_at, OLD.id, OLD.kind)
                  IS DISTINCT FROM (NEW.priority, NEW.visible_at, NEW.id, NEW.kind)))
    EXECUTE FUNCTION {pended_stamp}();
