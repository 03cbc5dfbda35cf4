-- What a replica needs beyond 0001: a map task's elements (the executor's ElementRecords), an event's
-- per-element entries, and the owner labels the orphan reaper matches Kubernetes objects with.

CREATE TABLE taskplug_elements (
    execution_id bigint NOT NULL REFERENCES taskplug_executions ON DELETE CASCADE,
    idx integer NOT NULL,
    record jsonb NOT NULL,
    epoch bigint NOT NULL,
    PRIMARY KEY (execution_id, idx)
);

ALTER TABLE taskplug_events ADD COLUMN external_resources jsonb;

-- "<namespace>/<execution-id label>": what the objects of this execution carry (written at first claim).
ALTER TABLE taskplug_executions ADD COLUMN object_owner text;
CREATE INDEX taskplug_executions_object_owner ON taskplug_executions (object_owner);
