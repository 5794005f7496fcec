-- The database's clock, which decides every eligibility time.
-- Parameters: none. Returns: now().
SELECT now()
