-- Fragment {run_facts}: the journal's facts for a single settlement, from the parameters
-- facts (JSON text or null) and owner: the run's facts with the worker that ran it
-- ("worker"), which wins over a key of the same name.
coalesce(%(facts)s::jsonb, '{{}}') || jsonb_build_object('worker', %(owner)s::text)
