-- Whether this session's server takes the queue's writes: a standby (in recovery) does
-- not, nor does a server whose transactions start read-only (a primary demoted in place).
-- Parameters: none. Returns: (in recovery, transactions read-only).
SELECT pg_is_in_recovery(), current_setting('transaction_read_only')::boolean
