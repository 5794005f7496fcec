-- The server process this session's statement runs in (the listener compares it with
-- the process id the connection announced, to find a pooling proxy in between).
-- Parameters: none. Returns: pg_backend_pid().
SELECT pg_backend_pid()
