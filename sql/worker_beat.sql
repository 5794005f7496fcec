-- A worker's heartbeat in the registry: inserts its row at the first beat and refreshes
-- its running count and last_seen at every later one, and deletes the rows of workers
-- not seen for three of their beats and half a minute (they died without leaving).
-- Parameters: name, host, pid, kinds (text[]), concurrency, running, beat_every.
-- Returns: nothing.
WITH pruned AS (
    DELETE FROM {workers}
    WHERE last_seen < now() - make_interval(secs => 3 * beat_every + 30)
      AND name <> %(name)s
)
INSERT INTO {workers} AS w (name, host, pid, kinds, concurrency, running, beat_every)
VALUES (%(name)s, %(host)s, %(pid)s, %(kinds)s::text[], %(concurrency)s, %(running)s,
        %(beat_every)s)
ON CONFLICT (name) DO UPDATE
SET running = excluded.running, last_seen = now(), beat_every = excluded.beat_every
