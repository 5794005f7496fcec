-- Takes the turn of the limited kinds a claim asks for: locks their rows of {kinds} in kind
-- order (two claimers never deadlock) until the claim's transaction ends. The claim itself
-- (claim_limited.sql, claim_keyed.sql) runs next as its own statement, so its snapshot,
-- taken after these locks were granted, sees every claim committed by earlier turns.
-- Parameters: kinds (text[]). Returns: each kind locked (those with a row), and whether
-- it has a key limit (claim_keyed.sql claims those).
SELECT k.kind, k.key_concurrency IS NOT NULL
FROM {kinds} AS k
WHERE k.kind = ANY(%(kinds)s::text[])
ORDER BY k.kind
FOR UPDATE
