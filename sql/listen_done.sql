-- Subscribes a waiter's dedicated connection to the prefix's channel of finished jobs.
-- Parameters: none. Returns: nothing.
LISTEN {done_channel_ident}
