-- Drops the prefix's functions (after drop_prefix): the one that settles children, the
-- trigger function that stamps a pending job's pended_xid, and the one that tags a new
-- job of a fair kind.
-- Parameters: none. Returns: nothing.
DROP FUNCTION IF EXISTS {finish_children}(uuid[], text), {pended_stamp}(),
    {fair_tag_of}(text, smallint, text)
