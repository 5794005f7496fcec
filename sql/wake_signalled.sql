-- After a durable run that waits for a signal settled (pending again): makes the job due
-- now if the signal arrived while the run was still claimed (a signal then wakes
-- nothing), and notifies its kind's channel.
-- Parameters: id, run. Returns: the kind when woken; no row otherwise.
WITH woken AS (
    UPDATE {jobs} AS j
    SET visible_at = now()
    FROM {waits} AS w
    WHERE j.id = %(id)s AND j.status = 'pending' AND j.run_count = %(run)s
      AND w.job_id = j.id AND w.run_no = j.run_count AND w.what = 'signal'
      AND j.visible_at > now()
      AND EXISTS (SELECT FROM {signals} AS s WHERE s.job_id = j.id AND s.name = w.name)
    RETURNING j.kind
)
SELECT kind, pg_notify({channel}, kind) FROM woken
