-- Takes the turn of the limited kinds a claim asks for: locks their rows of {kinds} in kind
-- order (two claimers never deadlock) until the claim's transaction ends. The claim itself
-- (claim_limited.sql) runs next as its own statement, so its snapshot, taken after these
-- locks were granted, sees every claim committed by the turns before this one.
-- Parameters: kinds (text[]). Returns: the kinds locked (those with a row).
SELECT k.kind
FROM {kinds} AS k
WHERE k.kind = ANY(%(kinds)s::text[])
ORDER BY k.kind
FOR UPDATE
