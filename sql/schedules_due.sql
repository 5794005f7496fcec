-- The firing state of the named schedules, and the database clock that decides what is due.
-- Parameters: names (text[]). Returns: name, fingerprint, active, next_slot, now() per row
-- found; a single row of nulls but now() when none is.
SELECT s.name, s.fingerprint, s.active, s.next_slot, clock.now
FROM (SELECT now() AS now) AS clock
LEFT JOIN {schedules} AS s ON s.name = ANY (%(names)s::text[])
