-- Drops every table of the prefix (jobs, journal, schedules, migration history): `venturi
-- demo` removes its throwaway prefix with it.
-- Parameters: none. Returns: nothing.
DROP TABLE IF EXISTS {journal}, {jobs}, {schedules}, {schema_history} CASCADE
