-- Fragment {pending_key_taken}: the conflict target of the pending-dedup unique index.
ON CONFLICT (kind, dedup_key) WHERE status = 'pending' AND dedup_key IS NOT NULL
