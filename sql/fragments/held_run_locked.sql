-- Fragment {held_run_locked}: the job of the durable run named by parameters id, owner
-- and run, while that run still holds its claim ({held_by_run}), its row share-locked so
-- a recovery or a cancel cannot slip between this fence and the caller's commit. Returns
-- the job's id, or no row once the run lost its claim.
SELECT j.id
FROM {jobs} AS j,
     (SELECT %(id)s::uuid AS id, %(owner)s::text AS owner, %(run)s::integer AS run) AS b
WHERE {held_by_run}
FOR SHARE OF j
