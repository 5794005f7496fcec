-- Fragment {kind_held_back}: true for the row `k` of {kinds} whose kind the plain claim
-- must leave alone: paused, or with a limit that only claim_limited.sql keeps.
(k.paused OR k.concurrency IS NOT NULL OR k.key_concurrency IS NOT NULL
    OR k.rate_limit IS NOT NULL)
