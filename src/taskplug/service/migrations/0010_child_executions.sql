-- A launch-plan node's child execution is an execution row of its own, labelled with its parent's key
-- (parent-execution). When it ends, the replica driving the parent is told at once, whichever replica drove
-- the child: NOTIFY taskplug_child with {"parent": <parent's key>, "child": <child's key>}.

CREATE FUNCTION taskplug_notify_parent() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(
        'taskplug_child',
        json_build_object('parent', NEW.labels ->> 'parent-execution', 'child', NEW.key)::text
    );
    RETURN NEW;
END
$$;

CREATE TRIGGER taskplug_child_ended
    AFTER UPDATE OF terminal ON taskplug_executions
    FOR EACH ROW
    WHEN (NEW.terminal AND NOT OLD.terminal AND NEW.labels ? 'parent-execution')
    EXECUTE FUNCTION taskplug_notify_parent();
