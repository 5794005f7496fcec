-- Locks the pending job holding a dedup key, for a merge function to combine payloads.
-- Parameters: kind, dedup_key. Returns: id, payload, run_count; no row if none holds it.
SELECT id, payload, run_count FROM {jobs}
WHERE kind = %(kind)s AND dedup_key = %(dedup_key)s AND status = 'pending'
FOR UPDATE
