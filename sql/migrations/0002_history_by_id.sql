-- History pages by id, the primary key, so the (created_at DESC, id DESC) index is no
-- longer read; it only made every enqueue write one more index entry.
-- DROP INDEX takes the jobs table's exclusive lock for a moment: it waits for open
-- transactions on the table, bounded by the migration's lock_timeout.
DROP INDEX IF EXISTS {history_idx};
