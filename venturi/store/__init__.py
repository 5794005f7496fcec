"""The way to the database: `PostgresStore` (every write, claim and run's end) and
`ReadStore` (what a dashboard reads), on `Connections` to one database; the SQL files
they run, the migrations, the listener and the error policy."""
