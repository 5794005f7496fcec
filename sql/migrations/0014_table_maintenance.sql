-- Autovacuum by row count for the tables a busy queue churns. PostgreSQL's defaults
-- vacuum a table once a fifth of it is dead, which on a jobs table of millions of rows
-- leaves hundreds of thousands of dead versions, with claim-index entries every claim
-- walks past; and they throttle each vacuum (cost delay), which a queue's small hot
-- table does not need. Workers also vacuum the jobs table themselves between
-- autovacuum's visits (venturi.worker.vacuuming); these settings keep the table in
-- shape while no worker runs and look after the journal, which only grows and is pruned.
-- Changing storage parameters takes a lock that neither reads nor writes wait for.
ALTER TABLE {jobs} SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 10000,
    autovacuum_analyze_scale_factor = 0,
    autovacuum_analyze_threshold = 10000,
    autovacuum_vacuum_cost_delay = 0
);

ALTER TABLE {journal} SET (
    autovacuum_vacuum_scale_factor = 0,
    autovacuum_vacuum_threshold = 10000,
    autovacuum_vacuum_insert_scale_factor = 0,
    autovacuum_vacuum_insert_threshold = 100000,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
