-- Drops every table of the prefix (jobs, journal, kinds, schedules, migration history):
-- `venturi demo` removes its throwaway prefix with it.
-- Parameters: none. Returns: nothing.
DROP TABLE IF EXISTS {journal}, {jobs}, {kinds}, {schedules}, {schema_history} CASCADE
