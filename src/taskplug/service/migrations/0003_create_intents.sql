-- Intents to create: a web-API create is not idempotent, so a replica records, fenced by its claim, that it
-- is about to send one (before the call), and the commit of the call's result marks the intent's outcome
-- (after). An unknown create is exactly an intent whose outcome_at is NULL when it is written again: the
-- create may have been sent and its answer was never committed. One row per (execution, element, attempt),
-- for a single task's attempts and a map task's elements' retry attempts alike; an attempt row written for
-- anything else (an event, a quota token granted) is no intent.

CREATE TABLE taskplug_create_intents (
    execution_id bigint NOT NULL REFERENCES taskplug_executions ON DELETE CASCADE,
    element integer NOT NULL,                     -- the map element's index; -1: the execution's own task
    attempt integer NOT NULL,                     -- the attempt (a single task's, or the element's retry)
    resource_name text NOT NULL,                  -- the generated name the create is sent with
    epoch bigint NOT NULL,                        -- the lease epoch the (latest) intent was written under
    intent_at timestamptz NOT NULL DEFAULT now(),
    outcome_at timestamptz,                       -- when the create's result was committed; NULL: unknown
    PRIMARY KEY (execution_id, element, attempt)
);
