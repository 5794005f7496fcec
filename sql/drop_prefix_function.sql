-- Drops the prefix's function that settles children (after drop_prefix).
-- Parameters: none. Returns: nothing.
DROP FUNCTION IF EXISTS {finish_children}(uuid[], text)
