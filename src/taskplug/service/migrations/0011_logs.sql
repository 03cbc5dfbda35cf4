-- The kept copy of each container's log, taken by the replica that saw its pod end (or deleted it), so that a
-- finished attempt's log stays readable after its pod is gone. Keyed by execution, the node the pod ran
-- (its unique node id), the attempt, the pod and the container; bounded: ``log`` holds the last bytes of what
-- the container printed (``size`` bytes in all; ``size > octet_length(log)`` when the beginning was cut).
-- Deleted with its execution (taskplug gc).

CREATE TABLE taskplug_logs (
    execution_id bigint NOT NULL REFERENCES taskplug_executions ON DELETE CASCADE,
    node text NOT NULL,
    attempt integer NOT NULL,
    pod text NOT NULL,
    container text NOT NULL,
    log bytea NOT NULL,
    size bigint NOT NULL,
    ended boolean NOT NULL,                       -- the pod had ended when it was kept (not aborted midway)
    kept_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, node, attempt, pod, container)
);
CREATE INDEX taskplug_logs_pod ON taskplug_logs (pod);
