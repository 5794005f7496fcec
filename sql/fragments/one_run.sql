-- Fragment {one_run}: the one run a single settlement names, as the row (id, owner, run)
-- that {held_by_run} fences with, from the parameters id, owner, run.
(SELECT %(id)s::uuid AS id, %(owner)s::text AS owner, %(run)s::integer AS run)
