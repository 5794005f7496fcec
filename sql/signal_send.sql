-- Delivers a signal to a job (locked by signal_lock in this transaction, not finished):
-- keeps it, journals it, and when the job is pending waiting for this signal makes it
-- due now and notifies its kind's channel.
-- Parameters: id, name, payload (JSON text or null).
-- Returns: (signal id, whether the job was woken).
WITH sent AS (
    INSERT INTO {signals} (job_id, name, payload)
    VALUES (%(id)s, %(name)s, %(payload)s::jsonb)
    RETURNING id
),
woken AS (
    UPDATE {jobs} AS j
    SET visible_at = now()
    FROM {waits} AS w
    WHERE j.id = %(id)s AND j.status = 'pending' AND w.job_id = j.id
      AND w.run_no = j.run_count AND w.what = 'signal' AND w.name = %(name)s
      AND j.visible_at > now()
    RETURNING j.kind
),
journaled AS (
    INSERT INTO {journal} (job_id, kind, run_no, outcome, note, attachment, facts)
    SELECT j.id, j.kind, j.run_count, 'signalled', 'signal ' || %(name)s,
           %(payload)s::jsonb, jsonb_build_object('signal', %(name)s)
    FROM {jobs} AS j
    WHERE j.id = %(id)s
),
announced AS (
    SELECT count(pg_notify({channel}, kind)) AS n FROM woken
)
SELECT sent.id, announced.n > 0 FROM sent CROSS JOIN announced
