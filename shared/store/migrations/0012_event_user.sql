-- Writers that know a memory's user name it on the event (the janitor reads
-- it in the same statement): the trigger looks it up only for the others,
-- instead of once per event in a run that writes a million of them.
DROP TRIGGER memory_events_user ON memory_events;
CREATE TRIGGER memory_events_user BEFORE INSERT ON memory_events
    FOR EACH ROW WHEN (NEW.user_id IS NULL) EXECUTE FUNCTION memory_events_name_user();

-- Likewise a statement that sets `status_at` itself (the janitor, on its
-- run's clock; a restore, putting back the time a memory had) calls no
-- function: the trigger fires only for writers that leave it to Postgres.
DROP TRIGGER memories_status_at ON memories;
CREATE TRIGGER memories_status_at BEFORE UPDATE OF status ON memories
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status
                       AND NEW.status_at IS NOT DISTINCT FROM OLD.status_at)
    EXECUTE FUNCTION memories_status_changed();
