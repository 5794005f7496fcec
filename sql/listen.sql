-- Subscribes the listener's dedicated connection to the prefix's channel.
-- Parameters: none. Returns: nothing.
LISTEN {channel_ident}
