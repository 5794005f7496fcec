-- Fragment {fair_places}: the CTE `placed` (id, priority, lease, place_at, place_id): each
-- job of the CTE `placeable` (id, kind, priority, visible_at, fair_tag, lease) with its
-- place in claim order (after priority). A fair kind's jobs take the places of their
-- (kind, priority) level's jobs by age, in tag order: how many of them a claim's limit
-- takes is decided by age against the other kinds, which of them by tag (cut by their
-- own ages, a key's newer job with a smaller tag would lose its turn to an older job with
-- a larger one). A job without a tag keeps its own place.
placed AS (
    SELECT by_tag.id, by_tag.priority, by_tag.lease, by_age.visible_at AS place_at,
           by_age.id AS place_id
    FROM (
        SELECT p.id, p.kind, p.priority, p.lease,
               row_number() OVER (
                   PARTITION BY p.kind, p.priority ORDER BY p.fair_tag, p.visible_at, p.id
               ) AS nth
        FROM placeable AS p
    ) AS by_tag
    JOIN (
        SELECT p.kind, p.priority, p.visible_at, p.id,
               row_number() OVER (
                   PARTITION BY p.kind, p.priority ORDER BY p.visible_at, p.id
               ) AS nth
        FROM placeable AS p
    ) AS by_age
        ON by_age.kind = by_tag.kind AND by_age.priority = by_tag.priority
       AND by_age.nth = by_tag.nth
)
