-- Fragment {fair_tag}: the fair-share tag of one new job of %(kind)s with
-- %(concurrency_key)s (a null key is a share of its own) at %(priority)s, or NULL when
-- the kind is not fair: the later of the smallest tag due at that priority (where claims
-- are) and the key's latest pending tag there plus 1/weight (0 when nothing is
-- pending). Only a fair kind's row gets past the kinds table, so other kinds pay one
-- probe of it.
(SELECT greatest(
            (SELECT j.fair_tag FROM {jobs} AS j
             WHERE j.status = 'pending' AND j.fair_tag IS NOT NULL AND j.kind = k.kind
               AND j.priority = %(priority)s AND j.visible_at <= now()
             ORDER BY j.fair_tag
             LIMIT 1),
            coalesce(
                (SELECT j.fair_tag FROM {jobs} AS j
                 WHERE j.status = 'pending' AND j.fair_tag IS NOT NULL AND j.kind = k.kind
                   AND j.concurrency_key = %(concurrency_key)s AND j.priority = %(priority)s
                 ORDER BY j.fair_tag DESC
                 LIMIT 1),
                (SELECT j.fair_tag FROM {jobs} AS j
                 WHERE %(concurrency_key)s::text IS NULL
                   AND j.status = 'pending' AND j.fair_tag IS NOT NULL AND j.kind = k.kind
                   AND j.concurrency_key IS NULL AND j.priority = %(priority)s
                 ORDER BY j.fair_tag DESC
                 LIMIT 1)
            ) + 1.0 / coalesce(
                (SELECT w.weight FROM {fair_weights} AS w
                 WHERE w.kind = k.kind AND w.key = %(concurrency_key)s), 1.0),
            0)
 FROM {kinds} AS k
 WHERE k.kind = %(kind)s AND k.fair)
