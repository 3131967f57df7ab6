-- Where a memory came from, so recall can label it and keep what a tool or a
-- document said from outranking what the user said (issue 17): the source of
-- the turn of its first fact (user, agent, tool, external; NULL for the
-- janitor's summaries of several memories). `flags` keeps the poisoning
-- screen's record for the memory (`screen:<score>`, `poison:<reason>`), which
-- `include: quarantined` shows.
ALTER TABLE memories
    ADD COLUMN source text CHECK (source IN ('user', 'agent', 'tool', 'external')),
    ADD COLUMN flags text[] NOT NULL DEFAULT '{}';

UPDATE memories m
   SET source = t.source
  FROM memory_sources s
  JOIN turns t ON t.tenant = s.tenant AND t.turn_id = s.turn_id
 WHERE s.memory_id = m.id;

-- The screen's reasons for memories quarantined before this column existed.
UPDATE memories m
   SET flags = t.flags
  FROM memory_sources s
  JOIN turns t ON t.tenant = s.tenant AND t.turn_id = s.turn_id
 WHERE s.memory_id = m.id AND m.status = 'quarantined' AND t.quarantine;
