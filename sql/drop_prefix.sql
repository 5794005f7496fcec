-- Drops every table of the prefix (jobs, journal, kinds, migration history): `venturi demo`
-- removes its throwaway prefix with it.
-- Parameters: none. Returns: nothing.
DROP TABLE IF EXISTS {journal}, {jobs}, {kinds}, {schema_history} CASCADE
