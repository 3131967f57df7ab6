-- The entities index holds only memories recall finds by default (active,
-- quarantined, superseded: `Status::INDEXED`), as the terms index does since
-- 0013. Archiving is a status change, so each archived row (most of a store's
-- idle memories, in a janitor run) took a new entry for every one of its
-- entities in this index, which nothing reads for archived memories. Recall
-- says the predicate in its entity queries; a recall that includes archived
-- memories reads the user's rows.
DROP INDEX memories_entities;
CREATE INDEX memories_entities ON memories USING gin (entities) WITH (fastupdate = off)
    WHERE status IN ('active', 'quarantined', 'superseded');
