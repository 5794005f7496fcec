-- Drops the prefix's domains (after drop_prefix, which drops the columns using them).
-- Parameters: none. Returns: nothing.
DROP DOMAIN IF EXISTS {job_status}, {parent_failure}, {journal_outcome}
