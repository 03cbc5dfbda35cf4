-- A node event names its node (Flyte's NodeExecutionEvent node_name: the node's metadata name), which is
-- how the views name a node no stored closure describes (a @dynamic node's nodes). NULL for other events
-- and for events written before.

ALTER TABLE taskplug_events ADD COLUMN name text;
