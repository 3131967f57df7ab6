-- Recall quality: a memory keeps the context it was said in, and its search
-- terms are words and their English stems.

-- The turn the memory's first source turn replied to, as
-- {"turn_id", "speaker", "content"} (`hindsight_shared::turn::TurnContext`):
-- its content is searched by the keyword channel with the memory's own, and
-- it is shown with the memory. NULL when the turn opened its session.
ALTER TABLE memories ADD COLUMN context jsonb;

-- Which `hindsight_shared::terms` made `terms`: 1 folded plurals only, 2 adds
-- stems, entities and the context. Rows of an older version are rewritten in
-- the background by the persist service (`Store::upgrade_terms`); until then
-- they are found by their words only.
ALTER TABLE memories ADD COLUMN terms_version smallint NOT NULL DEFAULT 1;
ALTER TABLE memories ALTER COLUMN terms_version SET DEFAULT 2;
CREATE INDEX memories_terms_to_upgrade ON memories (terms_version) WHERE terms_version < 2;

-- The filter looks up the turn a new turn replies to: the session's latest
-- kept turn before it in the stream.
CREATE INDEX turns_previous_in_session ON turns (tenant, session_id, stream_seq DESC) WHERE fate = 'kept';
