-- Node records keyed by node path: a map task's elements become the child nodes of its root node
-- ("<root node id>/<index>", e.g. n0/3), stored as the executor's NodeRecord, and every record's JSON speaks
-- NodeRecord's key names. What the release before wrote is converted here, in the migration's transaction:
-- an execution record's "phase" is its root node's "task_phase"; an element's "index" becomes its "path" and
-- its "attempts" its "attempt"; "user_failures" (written, never read) is dropped. The root node's id is the
-- last segment of the executor's execution key (project/domain/name/node), which the record keeps ("key"; the
-- row's own key may be a submitter's idempotency key).
-- taskplug_create_intents keeps its integer "element" (a map element's index, -1 for the execution's task).

CREATE TABLE taskplug_nodes (
    execution_id bigint NOT NULL REFERENCES taskplug_executions ON DELETE CASCADE,
    path text NOT NULL,                           -- the node's path under the execution's root: n0/3
    record jsonb NOT NULL,                        -- the executor's NodeRecord
    epoch bigint NOT NULL,
    PRIMARY KEY (execution_id, path)
);

INSERT INTO taskplug_nodes (execution_id, path, record, epoch)
SELECT el.execution_id,
       regexp_replace(coalesce(e.record->>'key', e.key), '^.*/', '') || '/' || el.idx,
       (el.record - 'index' - 'attempts' - 'user_failures')
           || jsonb_build_object('path', regexp_replace(coalesce(e.record->>'key', e.key), '^.*/', '') || '/' || el.idx)
           || jsonb_strip_nulls(jsonb_build_object('attempt', el.record->'attempts')),
       el.epoch
  FROM taskplug_elements el JOIN taskplug_executions e ON e.id = el.execution_id;

UPDATE taskplug_executions
   SET record = (record - 'phase' - 'user_failures')
                || jsonb_build_object('path', regexp_replace(coalesce(record->>'key', key), '^.*/', ''))
                || jsonb_strip_nulls(jsonb_build_object('task_phase', record->'phase'))
 WHERE record <> '{}'::jsonb AND NOT record ? 'path';

DROP TABLE taskplug_elements;
