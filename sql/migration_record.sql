-- Records one applied migration, in the transaction that applied it.
-- Parameters: version, name. Returns: nothing.
INSERT INTO {schema_history} (version, name) VALUES (%(version)s, %(name)s)
