-- Unsubscribes the listener's connection from the prefix's channel (a worker that
-- found NOTIFYs do not come back stops listening and polls).
-- Parameters: none. Returns: nothing.
UNLISTEN {channel_ident}
