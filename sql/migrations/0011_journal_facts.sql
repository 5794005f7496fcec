-- What code reads about a run, as data beside the human note: who ran it (worker), why
-- it failed (error: type and message), that its lease lapsed (lost), and what an
-- integration keeps for itself (the Django Tasks backend's django_task). Null when a
-- row has nothing to say (rows written before this migration, enqueue-side rows).
-- Adding a nullable column without a default rewrites nothing and holds the journal's
-- lock only for the catalog change.
ALTER TABLE {journal} ADD COLUMN IF NOT EXISTS facts jsonb;
