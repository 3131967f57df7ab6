-- A purge deletes memories that others may still point at (`merged_into`,
-- `superseded_by`, both ON DELETE SET NULL): Postgres looks for those
-- pointers once per deleted row, and without an index that is a scan of the
-- whole table each time (30,000 purged out of a million memories: hours).
-- Few memories point anywhere, so the indexes hold only those that do.
CREATE INDEX memories_merged_into ON memories (merged_into) WHERE merged_into IS NOT NULL;
CREATE INDEX memories_superseded_by ON memories (superseded_by) WHERE superseded_by IS NOT NULL;
