-- The whole data model (ARCHITECTURE.md, "Data model"). Postgres is the source
-- of truth; the vector index is derived from `memories` and can be rebuilt.
-- Every timestamp is UTC (timestamptz).

-- Every raw turn ever received that passed validation, with its fate. Turns
-- that failed validation are in the DLQ stream with their reason instead.
CREATE TABLE turns (
    tenant          text        NOT NULL,
    turn_id         text        NOT NULL,
    user_id         text        NOT NULL,
    session_id      text        NOT NULL,
    agent_id        text,
    speaker         text        NOT NULL,
    role            text        NOT NULL CHECK (role IN ('user', 'assistant', 'tool', 'system')),
    source          text        NOT NULL CHECK (source IN ('user', 'agent', 'tool', 'external')),
    trust           text        NOT NULL CHECK (trust IN ('high', 'medium', 'low')),
    -- Secrets are redacted before the content is stored.
    content         text        NOT NULL,
    metadata        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    ts              timestamptz NOT NULL,
    received_at     timestamptz NOT NULL DEFAULT now(),
    -- Sequence in the TURNS stream: tells a redelivery (same sequence) from a
    -- second publish of the same turn (another sequence).
    stream_seq      bigint      NOT NULL,
    fate            text        NOT NULL CHECK (fate IN ('kept', 'dropped')),
    reason          text,
    quarantine      boolean     NOT NULL DEFAULT false,
    flags           text[]      NOT NULL DEFAULT '{}',
    -- Stream sequences of later publishes of the same turn (each dropped as a
    -- duplicate), so every publish is accounted for; capped at 1000.
    duplicate_seqs  bigint[]    NOT NULL DEFAULT '{}',
    -- Set by the extract stage: 'facts' or 'no_facts' (with the reason), and
    -- the facts it emitted, so a redelivered turn re-emits the very same facts.
    extract_outcome text CHECK (extract_outcome IN ('facts', 'no_facts')),
    extract_reason  text,
    extractor       text,
    facts           jsonb,
    PRIMARY KEY (tenant, turn_id)
);
CREATE INDEX turns_previous_by_speaker ON turns (tenant, session_id, speaker, stream_seq DESC);
CREATE INDEX turns_by_user ON turns (tenant, user_id, ts DESC);

CREATE TABLE memories (
    id                uuid        PRIMARY KEY,
    tenant            text        NOT NULL,
    user_id           text        NOT NULL,
    agent_id          text,
    session_id        text,
    scope             text        NOT NULL DEFAULT 'private' CHECK (scope IN ('private', 'shared')),
    kind              text        NOT NULL CHECK (kind IN ('episodic', 'semantic')),
    fact_type         text        NOT NULL,
    content           text        NOT NULL,
    -- The content lowercased, without punctuation or extra spaces: exact and
    -- near-exact duplicates merge whatever their cosine.
    content_key       text        NOT NULL,
    entities          text[]      NOT NULL DEFAULT '{}',
    importance        real        NOT NULL CHECK (importance BETWEEN 0 AND 1),
    confidence        real        NOT NULL CHECK (confidence BETWEEN 0 AND 1),
    source_trust      text        NOT NULL CHECK (source_trust IN ('high', 'medium', 'low')),
    status            text        NOT NULL DEFAULT 'active'
                                  CHECK (status IN ('active', 'superseded', 'quarantined', 'archived', 'deleted')),
    superseded_by     uuid        REFERENCES memories (id),
    occurred_at       timestamptz,
    valid_from        timestamptz,
    expires_at        timestamptz,
    created_at        timestamptz NOT NULL DEFAULT now(),
    updated_at        timestamptz NOT NULL DEFAULT now(),
    last_accessed_at  timestamptz,
    access_count      integer     NOT NULL DEFAULT 0,
    archived_at       timestamptz,
    embedding_model   text        NOT NULL,
    embedding_version text        NOT NULL,
    -- Kept so that the index can be rebuilt without re-embedding.
    embedding         real[],
    index_state       text        NOT NULL DEFAULT 'pending' CHECK (index_state IN ('pending', 'indexed', 'removed'))
);
CREATE INDEX memories_by_user ON memories (tenant, user_id, status);
CREATE INDEX memories_pending_index ON memories (embedding_model, updated_at) WHERE index_state = 'pending';
CREATE INDEX memories_by_content_key ON memories (tenant, user_id, embedding_model, content_key) WHERE status = 'active';

-- Provenance: which turns (and which facts of them) a memory came from.
-- A fact lands in exactly one memory, so persisting it twice changes nothing.
CREATE TABLE memory_sources (
    memory_id uuid        NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    fact_id   text        NOT NULL,
    tenant    text        NOT NULL,
    turn_id   text        NOT NULL,
    added_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (memory_id, fact_id),
    UNIQUE (tenant, fact_id)
);
CREATE INDEX memory_sources_by_turn ON memory_sources (tenant, turn_id);

-- Audit log of every change to a memory, with who made it.
CREATE TABLE memory_events (
    id        bigserial   PRIMARY KEY,
    memory_id uuid        NOT NULL,
    tenant    text        NOT NULL,
    event     text        NOT NULL CHECK (event IN (
                  'create', 'merge', 'update', 'supersede', 'archive', 'restore',
                  'delete', 'decay', 'consolidate', 'purge', 'quarantine')),
    actor     text        NOT NULL,
    run_id    uuid,
    detail    jsonb       NOT NULL DEFAULT '{}'::jsonb,
    at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX memory_events_by_memory ON memory_events (memory_id, at);
CREATE INDEX memory_events_by_run ON memory_events (run_id) WHERE run_id IS NOT NULL;

-- What each janitor run did, with enough detail to undo it.
CREATE TABLE maintenance_runs (
    id          uuid        PRIMARY KEY,
    tenant      text,
    started_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    dry_run     boolean     NOT NULL,
    status      text        NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'finished', 'failed', 'restored')),
    counts      jsonb       NOT NULL DEFAULT '{}'::jsonb,
    errors      jsonb       NOT NULL DEFAULT '[]'::jsonb,
    restored_at timestamptz
);
