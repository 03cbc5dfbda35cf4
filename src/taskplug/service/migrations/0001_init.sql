-- Executions shared by executor replicas (see taskplug.service's docstring for the protocol).
-- Liveness is on the replica row (a heartbeat in database time); fencing is on the execution row: every
-- write by a replica says WHERE owner_id = <me> AND lease_epoch = <the epoch it claimed>.

CREATE TABLE taskplug_replicas (
    id uuid PRIMARY KEY,                          -- one per process start (an incarnation)
    host text NOT NULL,
    pid integer NOT NULL,
    version text NOT NULL,
    capacity integer NOT NULL,
    owned integer NOT NULL DEFAULT 0,
    metrics jsonb NOT NULL DEFAULT '{}',          -- the replica's metric samples, refreshed with the heartbeat
    started_at timestamptz NOT NULL DEFAULT now(),
    heartbeat_at timestamptz NOT NULL DEFAULT now(),
    fenced_at timestamptz                         -- set once (by the sweeper or at shutdown), never unset
);

CREATE TABLE taskplug_executions (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key text NOT NULL UNIQUE,                     -- chosen by the submitter: submitting is idempotent
    task_type text NOT NULL,
    plugin_id text,
    spec jsonb NOT NULL,                          -- the execution spec document, as submitted
    labels jsonb NOT NULL DEFAULT '{}',
    phase text NOT NULL DEFAULT 'Queued',
    attempt integer NOT NULL DEFAULT 0,
    terminal boolean NOT NULL DEFAULT false,
    record jsonb NOT NULL DEFAULT '{}',           -- the executor's ExecutionRecord; {} until first driven
    outputs jsonb,                                -- the outputs as plain values, once succeeded
    error jsonb,                                  -- the last error, once failed
    abort_requested_at timestamptz,
    owner_id uuid,                                -- NULL: claimable
    lease_epoch bigint NOT NULL DEFAULT 0,        -- the fencing token, +1 per claim
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    started_at timestamptz,
    finished_at timestamptz
) WITH (fillfactor = 80);

CREATE INDEX taskplug_executions_claimable ON taskplug_executions (id) WHERE owner_id IS NULL AND NOT terminal;
CREATE INDEX taskplug_executions_owner ON taskplug_executions (owner_id) WHERE NOT terminal;
CREATE INDEX taskplug_executions_newest ON taskplug_executions (created_at DESC, id DESC);
CREATE INDEX taskplug_executions_phase ON taskplug_executions (phase, created_at DESC, id DESC);

CREATE TABLE taskplug_attempts (
    execution_id bigint NOT NULL REFERENCES taskplug_executions ON DELETE CASCADE,
    attempt integer NOT NULL,
    resource_name text NOT NULL,                  -- the deterministic object name / web-API resource id
    resource_meta jsonb,                          -- a web-API resource's meta, committed right after create
    phase text NOT NULL,
    reason text,
    error jsonb,
    logs jsonb,
    epoch bigint NOT NULL,
    started_at timestamptz,
    finished_at timestamptz,
    PRIMARY KEY (execution_id, attempt)
);

CREATE TABLE taskplug_events (
    seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    execution_id bigint NOT NULL REFERENCES taskplug_executions ON DELETE CASCADE,
    attempt integer NOT NULL,
    phase text NOT NULL,
    version integer NOT NULL DEFAULT 0,
    reason text NOT NULL DEFAULT '',
    occurred_at timestamptz,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    error jsonb,
    logs jsonb,
    epoch bigint NOT NULL
);

CREATE INDEX taskplug_events_execution ON taskplug_events (execution_id, seq);
