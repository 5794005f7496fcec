-- The server process this session's statement runs in (compared with the process id
-- the connection announced, to find a pooling proxy in between: the listener's, and
-- each new pooled connection's under prepared_statements="auto").
-- Parameters: none. Returns: pg_backend_pid().
SELECT pg_backend_pid()
