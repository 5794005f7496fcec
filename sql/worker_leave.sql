-- A stopping worker leaves the registry.
-- Parameters: name. Returns: nothing.
DELETE FROM {workers} WHERE name = %(name)s
