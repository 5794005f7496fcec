-- The newest dead jobs (at most %(sample)s, by when they died, read backwards along the
-- finished-at index) grouped by kind and the first line of each one's last journal note:
-- why they died. Each group's size, when its newest died, and its newest few ids.
-- Parameters: sample. Returns: kind, first line of the note ('' without one), jobs,
-- newest finished_at, newest ids (uuid[]).
WITH recent AS (
    SELECT id, kind, finished_at
    FROM {jobs}
    WHERE finished_at IS NOT NULL AND status = 'dead'
    ORDER BY finished_at DESC
    LIMIT %(sample)s
),
noted AS (
    SELECT r.id, r.kind, r.finished_at,
           (SELECT n.note FROM {journal} AS n
            WHERE n.job_id = r.id AND n.note IS NOT NULL AND n.note <> ''
            ORDER BY n.id DESC LIMIT 1) AS note
    FROM recent AS r
)
SELECT kind, coalesce(split_part(note, E'\n', 1), ''), count(*), max(finished_at),
       (array_agg(id ORDER BY finished_at DESC, id DESC))[1:5]
FROM noted
GROUP BY 1, 2
ORDER BY 3 DESC, 1, 2
