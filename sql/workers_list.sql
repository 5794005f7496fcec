-- The registry's live workers (seen within three of their beats and half a minute),
-- by name, with the database time the list was read at.
-- Parameters: none. Returns: name, host, pid, kinds, concurrency, running, beat_every,
-- started_at, last_seen, taken_at (WorkerInfo.from_row order).
SELECT name, host, pid, kinds, concurrency, running, beat_every, started_at, last_seen, now()
FROM {workers}
WHERE last_seen >= now() - make_interval(secs => 3 * beat_every + 30)
ORDER BY name
