-- Fragment {new_job}: the columns and VALUES of one inserted job, from the parameters
-- id, kind, payload (JSON text), priority, delay (s) | at, max_attempts, dedup_key,
-- concurrency_key, trace_context (JSON text or null); its fair-share tag (fragment fair_tag).
(id, kind, payload, priority, visible_at, max_attempts, dedup_key, concurrency_key,
 trace_context, fair_tag)
VALUES (
    %(id)s, %(kind)s, %(payload)s::jsonb, %(priority)s,
    coalesce(%(at)s::timestamptz, now() + make_interval(secs => coalesce(%(delay)s::float8, 0))),
    %(max_attempts)s, %(dedup_key)s, %(concurrency_key)s, %(trace_context)s::jsonb,
    {fair_tag})
