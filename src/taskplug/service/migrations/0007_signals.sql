-- Gate nodes' signals (flyteadmin's signals table): one per (execution, signal id), created with its type by
-- the gate node that waits for it (the owning replica) and answered by a person through the API or the CLI.
-- Setting a value is not fenced by the execution's claim: the owner does not answer its own gates. A set is
-- followed, in its transaction, by NOTIFY taskplug_signal with the execution's key, which wakes the owner.
-- type and value are flyteidl protobuf bytes (core.LiteralType, core.Literal); value is NULL until set, and
-- a later set overwrites it (SignalService's SetSignal).

CREATE TABLE taskplug_signals (
    execution_id bigint NOT NULL REFERENCES taskplug_executions ON DELETE CASCADE,
    signal_id text NOT NULL,
    type bytea NOT NULL,
    value bytea,
    set_by text,                                  -- who set the value last: token:<name>, oidc:<who>, local
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (execution_id, signal_id)
);
