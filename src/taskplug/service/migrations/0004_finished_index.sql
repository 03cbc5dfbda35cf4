-- `taskplug gc` deletes executions that finished before a cutoff, oldest first, a batch at a time: this
-- partial index finds them without reading the live rows (and stays small: only terminal rows enter it).

CREATE INDEX taskplug_executions_finished ON taskplug_executions (finished_at, id) WHERE terminal;
