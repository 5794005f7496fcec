-- Drops every table of the prefix (jobs, journal, dependencies, kinds, fair-share weights,
-- schedules, workers, durable steps, signals and waits, migration history): `venturi demo` removes its
-- throwaway prefix with it, then its function (drop_prefix_function) and its domains
-- (drop_prefix_types); the order is
-- `venturi.store.housekeeping.DROP_PREFIX_STATEMENTS`.
-- Parameters: none. Returns: nothing.
DROP TABLE IF EXISTS {deps}, {steps}, {signals}, {waits}, {journal}, {jobs}, {kinds},
    {fair_weights}, {schedules}, {workers}, {schema_history} CASCADE
