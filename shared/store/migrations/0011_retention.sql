-- Bounded growth (issue 31, docs/janitor.md "Retention"): the janitor's
-- retention steps archive quarantined memories nobody reviewed, purge
-- superseded ones with the archived, and empty then delete old turns of the
-- archive, each exported first and restorable.

-- When a memory took its current status: the review period of a quarantined
-- memory and the retention of a superseded one count from here. NULL means
-- since its creation (it never changed status). Kept by a trigger, so that
-- every writer (persist, the API, the janitor) sets it alike; a statement
-- that sets it itself (a restore putting back the time it had) keeps its own.
ALTER TABLE memories ADD COLUMN status_at timestamptz;
UPDATE memories SET status_at = updated_at WHERE status IN ('superseded', 'quarantined');
CREATE FUNCTION memories_status_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status_at IS NOT DISTINCT FROM OLD.status_at THEN
        NEW.status_at := now();
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER memories_status_at BEFORE UPDATE OF status ON memories
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION memories_status_changed();
CREATE INDEX memories_status_at ON memories (coalesce(status_at, created_at))
    WHERE status IN ('superseded', 'quarantined');

-- A pinned memory is left as it is by every step of the janitor: never
-- decayed, merged, archived, consolidated or purged.
ALTER TABLE memories ADD COLUMN pinned boolean NOT NULL DEFAULT false;

-- Index points of memories a purge deleted while they were still in the
-- index (superseded ones are; archived ones normally are not any more): the
-- reconciler, which owns the index, removes them.
CREATE TABLE purged_points (
    run               uuid    NOT NULL,
    embedding_model   text    NOT NULL,
    embedding_version text    NOT NULL,
    dimension         integer NOT NULL,
    point             uuid    NOT NULL,
    PRIMARY KEY (run, point)
);

-- When a run emptied the turn (content, metadata and extracted facts
-- exported, then dropped): its id, fate, reason and times stay until the
-- turn's own retention ends.
ALTER TABLE turns ADD COLUMN content_dropped_at timestamptz;
CREATE INDEX turns_received_at ON turns (received_at);
