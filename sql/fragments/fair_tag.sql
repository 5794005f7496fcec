-- Fragment {fair_tag}: the fair-share tag of one new job of %(kind)s with
-- %(concurrency_key)s at %(priority)s (the function of migration 0018), or NULL when
-- the kind is not fair. Only a fair kind's row gets past the kinds table, so other
-- kinds pay one probe of it and never set up the function's lookups.
(SELECT {fair_tag_of}(k.kind, %(priority)s::smallint, %(concurrency_key)s::text)
 FROM {kinds} AS k
 WHERE k.kind = %(kind)s AND k.fair)
