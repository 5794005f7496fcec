"""Flow control: a kind's limits (concurrency, concurrency per key, rate), pausing, and
a worker's view of them. The limits themselves are kept by the database (the store's
claims), so every worker of every host obeys the same."""
