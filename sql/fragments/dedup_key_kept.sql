-- Fragment {dedup_key_kept}: the dedup key job `j` keeps when it goes back to pending.
-- A newer pending job may hold the key meanwhile (the unique index allows one pending
-- holder), and then `j` gives its key up.
CASE WHEN EXISTS (
          SELECT FROM {jobs} AS d
          WHERE d.kind = j.kind AND d.dedup_key = j.dedup_key AND d.status = 'pending')
     THEN NULL ELSE j.dedup_key END
