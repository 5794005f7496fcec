-- W3C trace context (the `traceparent`/`tracestate` carrier, a JSON object) of the
-- request that enqueued a job: every run of the job continues that trace. Null when the
-- producer was not traced. Adding a nullable column without a default rewrites nothing.
ALTER TABLE {jobs} ADD COLUMN IF NOT EXISTS trace_context jsonb;
