-- Search terms of each memory's content for recall's keyword channel, made by
-- `hindsight_shared::terms` (words, and CJK characters with their pairs, since
-- Chinese has no spaces for Postgres' own parsers to split on). Persist keeps
-- them in step with the content on every insert and merge.
ALTER TABLE memories ADD COLUMN terms text[] NOT NULL DEFAULT '{}';
CREATE INDEX memories_terms ON memories USING gin (terms);
