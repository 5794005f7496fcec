-- Lists the migrations applied to this prefix.
-- Parameters: none. Returns: version, name, in order.
SELECT version, name FROM {schema_history} ORDER BY version
