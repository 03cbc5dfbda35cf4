-- The data catalog shared by every replica (datacatalog's artifacts, tags and reservations, reduced): one row
-- per cached result, keyed as Flyte keys it (dataset project, domain, name "flyte_task-<task>", version
-- "<cache_version>-<in8>-<out8>", tag "flyte_cached-<inputs hash>"), pointing at the kept copy of its outputs
-- under the data root; and one reservation per key a cache_serialize task is computing (its owner, its expiry).
-- Neither refers to an execution row: deleting an execution (taskplug gc) keeps the results it cached.

CREATE TABLE taskplug_catalog (
    project text NOT NULL,
    domain text NOT NULL,
    dataset text NOT NULL,
    version text NOT NULL,
    tag text NOT NULL,
    uri text NOT NULL,
    source text NOT NULL,                         -- the producing execution's key and node
    task_version text NOT NULL,                   -- the producing task's version (not part of the key)
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, domain, dataset, version, tag)
);
CREATE INDEX taskplug_catalog_created ON taskplug_catalog (created_at);

CREATE TABLE taskplug_catalog_reservations (
    project text NOT NULL,
    domain text NOT NULL,
    dataset text NOT NULL,
    version text NOT NULL,
    tag text NOT NULL,
    owner text NOT NULL,
    expires_at timestamptz NOT NULL,
    PRIMARY KEY (project, domain, dataset, version, tag)
);

-- A cacheable task's events say its catalog status (Flyte's TaskNodeMetadata cache_status and catalog_key):
-- {"status": "CACHE_HIT", "key": {...}, "source": ...}; NULL for other tasks.
ALTER TABLE taskplug_events ADD COLUMN cache jsonb;
