-- Unsubscribes a waiter's connection from the prefix's channel of finished jobs.
-- Parameters: none. Returns: nothing.
UNLISTEN {done_channel_ident}
