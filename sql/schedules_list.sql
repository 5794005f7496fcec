-- Every schedule row of the prefix, for `venturi schedules`, `venturi stats` and tests.
-- Parameters: none. Returns: name, kind, expression, zone, payload, with_slot, priority,
-- max_attempts, catch_up, max_catch_up, active, last_slot, next_slot, fired_at, now().
SELECT name, kind, expression, zone, payload, with_slot, priority, max_attempts, catch_up,
       max_catch_up, active, last_slot, next_slot, fired_at, now()
FROM {schedules}
ORDER BY name
