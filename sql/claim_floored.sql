-- claim.sql's claim, with each kind's top probe started from the floor an earlier claim
-- of this store found (fragment floored_levels; `venturi.store.floors`): while a
-- held-back xmin horizon keeps vacuum from removing the index entries of the jobs
-- claimed before, it steps over none of them. The store uses it once the jobs table
-- holds enough dead row versions that stepping over them costs more than the floors.
-- Parameters: claim.sql's, and the kinds' floors (floor_kinds, floor_priorities,
-- floor_ats, floor_ids, floor_snapshots, floor_server). Returns: the claimed jobs
-- (JobRecord.from_row order) followed by NULLs, unordered, then one row of NULL job
-- columns followed by the floors found (fragment floors_found).
WITH RECURSIVE {claim_wanted},
{floored_levels},
{floored_picked},
claimed AS (
    {claim_update}
)
SELECT claimed.*, {floors_found}
