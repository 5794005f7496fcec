-- Whether the prefix's migration history table exists (in the search path).
-- Parameters: table (text). Returns: one boolean.
SELECT to_regclass(%(table)s) IS NOT NULL
