-- Fragment {held_by_run}: the fence of every settlement and lease renewal. Job `j` is
-- still held by the run `b` (columns id, owner, run, none null) names: same owner, same
-- run epoch, still claimed. A run that lost its claim matches nothing and so changes
-- nothing. The row is found by its primary key alone: owner and status are compared with
-- IS NOT DISTINCT FROM, the same test here (b's columns are never null), which no index
-- serves. With `=` the planner may instead read every claimed row through the stale index
-- for each run of a batch, a cost that grows with the claimed rows, not the batch.
j.id = b.id AND j.claimed_by IS NOT DISTINCT FROM b.owner AND j.run_count = b.run
AND j.status IS NOT DISTINCT FROM 'claimed'
