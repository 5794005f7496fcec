-- Makes the schedule rows match the schedules in a worker's code: adds new ones, updates
-- changed ones (a changed timing, or a row that was inactive, starts over at the given
-- next slot; other changes keep the row's place), and marks rows not listed inactive.
-- Rows are written in name order, so two workers starting at once never deadlock here.
-- Parameters: arrays names, kinds, expressions, zones, payloads (JSON text), with_slots,
-- priorities, max_attempts, catch_ups, max_catch_ups, fingerprints, next_slots.
-- Returns: name and 'added' | 'changed' | 'retired' for each row it wrote.
WITH wanted AS (
    SELECT *
    FROM unnest(
        %(names)s::text[], %(kinds)s::text[], %(expressions)s::text[], %(zones)s::text[],
        %(payloads)s::text[], %(with_slots)s::boolean[], %(priorities)s::smallint[],
        %(max_attempts)s::integer[], %(catch_ups)s::text[], %(max_catch_ups)s::integer[],
        %(fingerprints)s::text[], %(next_slots)s::timestamptz[]
    ) AS w(name, kind, expression, zone, payload, with_slot, priority, max_attempts,
           catch_up, max_catch_up, fingerprint, next_slot)
),
retiring AS (
    SELECT name FROM {schedules}
    WHERE active AND name <> ALL (%(names)s::text[])
    ORDER BY name
    FOR UPDATE
),
retired AS (
    UPDATE {schedules} AS s SET active = false, updated_at = now()
    FROM retiring WHERE s.name = retiring.name
    RETURNING s.name
),
upserted AS (
    INSERT INTO {schedules} AS s (name, kind, expression, zone, payload, with_slot, priority,
                                  max_attempts, catch_up, max_catch_up, fingerprint, next_slot)
    SELECT name, kind, expression, zone, payload::jsonb, with_slot, priority, max_attempts,
           catch_up, max_catch_up, fingerprint, next_slot
    FROM wanted
    ORDER BY name
    ON CONFLICT (name) DO UPDATE SET
        kind = excluded.kind,
        expression = excluded.expression,
        zone = excluded.zone,
        payload = excluded.payload,
        with_slot = excluded.with_slot,
        priority = excluded.priority,
        max_attempts = excluded.max_attempts,
        catch_up = excluded.catch_up,
        max_catch_up = excluded.max_catch_up,
        fingerprint = excluded.fingerprint,
        next_slot = CASE
            WHEN s.active AND s.expression = excluded.expression AND s.zone = excluded.zone
            THEN s.next_slot ELSE excluded.next_slot END,
        active = true,
        updated_at = now()
    WHERE s.fingerprint <> excluded.fingerprint OR NOT s.active
    RETURNING s.name, (s.xmax = 0) AS added
)
SELECT name, CASE WHEN added THEN 'added' ELSE 'changed' END FROM upserted
UNION ALL
SELECT name, 'retired' FROM retired
