-- Fragment {floor_server}: the server a statement runs on, as text, for the floors it
-- reports and the floors it is given (`venturi.store.floors`): a snapshot speaks of one
-- server's transactions. The postmaster's start time tells a promoted standby or a
-- restored server from the one a floor was found on; a restart after a crash keeps that
-- time but resets the background writer's statistics, and with them this text (as
-- epoch seconds: the same whatever a session's time zone).
extract(epoch FROM pg_postmaster_start_time())::text || ' '
    || coalesce(extract(epoch FROM pg_stat_get_bgwriter_stat_reset_time())::text, '')
