-- Fragment {held_by_run}: the fence of every settlement and lease renewal. Job `j` is
-- still held by the run `b` (columns id, owner, run) names: same owner, same run epoch,
-- still claimed. A run that lost its claim matches nothing and so changes nothing.
j.id = b.id AND j.claimed_by = b.owner AND j.run_count = b.run AND j.status = 'claimed'
