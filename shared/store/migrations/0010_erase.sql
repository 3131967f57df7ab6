-- Erasing a user (issue 30, docs/erase.md): every row that holds what the
-- user said goes, and what stays is a record without content that the erase
-- happened, by whom, when, with counts.

-- Audit events name the memory's user, so that an erase finds the events of
-- memories already purged: the memory row is gone, but an update's event
-- keeps the content it replaced. Filled on insert from the memory; events of
-- memories purged before this column existed are found by the memory ids in
-- the purge exports.
ALTER TABLE memory_events ADD COLUMN user_id text;
UPDATE memory_events e SET user_id = m.user_id FROM memories m WHERE m.id = e.memory_id;
CREATE INDEX memory_events_by_user ON memory_events (tenant, user_id);
CREATE FUNCTION memory_events_name_user() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.user_id IS NULL THEN
        NEW.user_id := (SELECT user_id FROM memories WHERE id = NEW.memory_id);
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER memory_events_user BEFORE INSERT ON memory_events
    FOR EACH ROW EXECUTE FUNCTION memory_events_name_user();

-- One erase of one user: a job with a state per place, kept after it ends as
-- the record that it happened. The user's id is held only while the job runs
-- (the filter refuses the user's new turns meanwhile); a finished job keeps
-- only its hash, which an operator can recompute to show the erase happened.
CREATE TABLE erasures (
    id          uuid        PRIMARY KEY,
    tenant      text        NOT NULL,
    user_id     text,
    user_hash   text        NOT NULL,
    actor       text        NOT NULL,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    status      text        NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'finished')),
    -- The places done so far, by name.
    places      text[]      NOT NULL DEFAULT '{}',
    -- What was removed, per place: numbers only.
    counts      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    CHECK ((status = 'running') = (user_id IS NOT NULL))
);
CREATE UNIQUE INDEX erasures_running ON erasures (tenant, user_id) WHERE status = 'running';
CREATE INDEX erasures_by_user ON erasures (tenant, user_hash, started_at DESC);

-- What an erase still has to remove outside Postgres, written by the same
-- transaction that deletes the rows naming it, so a job killed halfway knows
-- what is left: stream messages by stream and sequence, index points by
-- model and id. Numbers and ids only.
CREATE TABLE erasure_messages (
    erasure uuid   NOT NULL REFERENCES erasures (id) ON DELETE CASCADE,
    stream  text   NOT NULL,
    seq     bigint NOT NULL,
    PRIMARY KEY (erasure, stream, seq)
);
CREATE TABLE erasure_points (
    erasure           uuid    NOT NULL REFERENCES erasures (id) ON DELETE CASCADE,
    embedding_model   text    NOT NULL,
    embedding_version text    NOT NULL,
    dimension         integer NOT NULL,
    point             uuid    NOT NULL,
    PRIMARY KEY (erasure, point)
);
-- A step that removes many things at once (rewriting one purge export,
-- purging the working memory): written, with what it removes counted, before
-- it runs, and removed after, so a job killed in between runs it again
-- without counting it twice.
CREATE TABLE erasure_steps (
    erasure uuid NOT NULL REFERENCES erasures (id) ON DELETE CASCADE,
    step    text NOT NULL,
    PRIMARY KEY (erasure, step)
);
