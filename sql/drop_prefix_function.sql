-- Drops the prefix's functions (after drop_prefix): the one that settles children, and
-- the trigger function that stamps a pending job's pended_xid.
-- Parameters: none. Returns: nothing.
DROP FUNCTION IF EXISTS {finish_children}(uuid[], text), {pended_stamp}()
