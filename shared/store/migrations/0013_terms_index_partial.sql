-- The terms index holds only memories recall finds by default (active,
-- quarantined, superseded: `Status::INDEXED`). A janitor run archives most
-- of a store's idle memories, and without fastupdate each archived row wrote
-- every one of its terms into the index again: 62 % of the archive step's
-- time at 1,000,000 memories. Recall says the predicate in its keyword
-- queries; a recall that includes archived memories reads the user's rows.
DROP INDEX memories_terms;
CREATE INDEX memories_terms ON memories USING gin (terms) WITH (fastupdate = off)
    WHERE status IN ('active', 'quarantined', 'superseded');
