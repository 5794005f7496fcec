-- The fair-share tag of one new job, as a function of its own: a single enqueue calls it
-- only for a kind that is fair (sql/fragments/fair_tag.sql). Written inline, its five
-- lookups were set up on every execution of every enqueue, fair kind or not: about a
-- twentieth of a single enqueue's time on a 2-core machine. STABLE, so its queries see
-- the calling statement's snapshot, as the inline subqueries did.
-- The tag is the later of the smallest tag due at the job's priority (where claims are)
-- and its key's latest pending tag there plus 1/weight (0 when nothing is pending); a
-- null key is a share of its own.
CREATE FUNCTION {fair_tag_of}(new_kind text, new_priority smallint, new_key text)
RETURNS float8 LANGUAGE plpgsql STABLE AS $body$
BEGIN
    RETURN greatest(
        (SELECT j.fair_tag FROM {jobs} AS j
         WHERE j.status = 'pending' AND j.fair_tag IS NOT NULL AND j.kind = new_kind
           AND j.priority = new_priority AND j.visible_at <= now()
         ORDER BY j.fair_tag
         LIMIT 1),
        coalesce(
            (SELECT j.fair_tag FROM {jobs} AS j
             WHERE j.status = 'pending' AND j.fair_tag IS NOT NULL AND j.kind = new_kind
               AND j.concurrency_key = new_key AND j.priority = new_priority
             ORDER BY j.fair_tag DESC
             LIMIT 1),
            (SELECT j.fair_tag FROM {jobs} AS j
             WHERE new_key IS NULL
               AND j.status = 'pending' AND j.fair_tag IS NOT NULL AND j.kind = new_kind
               AND j.concurrency_key IS NULL AND j.priority = new_priority
             ORDER BY j.fair_tag DESC
             LIMIT 1)
        ) + 1.0 / coalesce(
            (SELECT w.weight FROM {fair_weights} AS w
             WHERE w.kind = new_kind AND w.key = new_key), 1.0),
        0);
END
$body$;
