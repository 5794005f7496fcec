-- The pended index holds only the jobs with a pended_xid: the only ones a claim from a
-- floor looks up there (by a range of transactions or one transaction: neither matches
-- a NULL). Its predicate is then one that a read of the pending jobs alone no longer
-- implies, so the planner cannot take it for the claim's reads in claim order: with
-- statistics taken while the queue was empty (autovacuum's analyze between two bursts)
-- a plan could read every pending job of a kind from it and sort them, for every claim,
-- until the next analyze.
DROP INDEX {pended_idx};
CREATE INDEX {pended_idx} ON {jobs} (kind, pended_xid)
    WHERE status IN ('pending', 'waiting') AND pended_xid IS NOT NULL;
