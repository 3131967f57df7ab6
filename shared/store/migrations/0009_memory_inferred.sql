-- Whether a memory is only what the assistant inferred (issue 18): a fact the
-- extractor marked `inferred` keeps that mark on its memory, until a stated
-- fact merges into it. The brief says "(inferred)".
ALTER TABLE memories ADD COLUMN inferred boolean NOT NULL DEFAULT false;
