-- A memory's stored vector moves to a table of its own. Inline, its 1.5 KB
-- made every memory row ~2 KB (Postgres moves a value out of a row only when
-- the row is over 2 KB), so the keyword channel, the recall rows and every
-- scan of a user's memories read four rows per page, and 100,000 memories
-- outgrew the default shared buffers. The vector is read only to index a
-- memory, by dedupe, by the janitor's vector steps and by recall for the
-- few candidates the index did not score.
--
-- A memory's vector is written in the same transaction as the memory; a
-- memory without one (none is written so today) has no row here.
CREATE TABLE memory_vectors (
    id        uuid   PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    embedding real[] NOT NULL
);

INSERT INTO memory_vectors (id, embedding)
SELECT id, embedding FROM memories WHERE embedding IS NOT NULL;

-- The column's space comes back as rows are rewritten (or at once with
-- `VACUUM FULL memories`, which locks the table while it runs).
ALTER TABLE memories DROP COLUMN embedding;
