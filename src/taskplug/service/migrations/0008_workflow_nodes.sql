-- Workflows: their events say whose they are, and every task node's creates have their own identity.
-- An event's kind is Flyte's event kind ("task": a task attempt's phase, "node": a workflow node's,
-- "workflow": the workflow's own) and its node the node's unique id in the workflow (NULL for the execution's
-- own root node). An intent to create is keyed by the node whose record carries the create's result: ''
-- for the execution's own record (a single task's attempt), a node path otherwise (a map's elements are
-- the children of the map node: its path with their index; a workflow's task node: its unique id, element
-- -1). What the release before wrote for a single map task's elements is moved under its root node's path.

ALTER TABLE taskplug_events ADD COLUMN kind text NOT NULL DEFAULT 'task';
ALTER TABLE taskplug_events ADD COLUMN node text;

ALTER TABLE taskplug_create_intents ADD COLUMN node text NOT NULL DEFAULT '';
UPDATE taskplug_create_intents i
   SET node = regexp_replace(coalesce(e.record->>'path', e.record->>'key', e.key), '^.*/', '')
  FROM taskplug_executions e
 WHERE e.id = i.execution_id AND i.element >= 0;
ALTER TABLE taskplug_create_intents DROP CONSTRAINT taskplug_create_intents_pkey;
ALTER TABLE taskplug_create_intents ADD PRIMARY KEY (execution_id, node, element, attempt);
