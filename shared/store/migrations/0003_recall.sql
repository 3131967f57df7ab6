-- Recall: the entity channel looks memories up by entity, and the gateway
-- authenticates tenants by API key.
--
-- Recall reads these GIN indexes on every request: without fastupdate, a
-- write goes straight into the index instead of a pending list that every
-- read scans until (auto)vacuum merges it (15 ms per lookup after 100k
-- inserts, measured); writes cost a little more, reads stay flat.
CREATE INDEX memories_entities ON memories USING gin (entities) WITH (fastupdate = off);
ALTER INDEX memories_terms SET (fastupdate = off);

-- A tenant exists once an operator creates it (`hindsight tenant create`).
CREATE TABLE tenants (
    name       text        PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Bearer keys, stored as SHA-256 of the key: a key is shown once, when made.
-- Keys are 256 random bits, so a fast hash is enough.
CREATE TABLE api_keys (
    key_hash   text        PRIMARY KEY,
    tenant     text        NOT NULL REFERENCES tenants (name) ON DELETE CASCADE,
    -- The first characters of the key, to tell keys apart in listings.
    prefix     text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz
);
CREATE INDEX api_keys_by_tenant ON api_keys (tenant);

-- Keyword-channel statistics per user, kept by a trigger so that BM25's
-- document frequencies are index lookups instead of counts over the user's
-- memories (which took hundreds of milliseconds at 100k memories). They count
-- every stored memory of the user, whatever its status: a statistic, not a
-- filter.
CREATE TABLE memory_terms (
    tenant  text   NOT NULL,
    user_id text   NOT NULL,
    term    text   NOT NULL,
    df      bigint NOT NULL,
    PRIMARY KEY (tenant, user_id, term)
);
CREATE TABLE memory_users (
    tenant      text   NOT NULL,
    user_id     text   NOT NULL,
    memories    bigint NOT NULL,
    total_terms bigint NOT NULL,
    PRIMARY KEY (tenant, user_id)
);

CREATE FUNCTION memories_keep_term_stats() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE memory_terms SET df = df - 1
         WHERE tenant = OLD.tenant AND user_id = OLD.user_id AND term = ANY (OLD.terms);
        UPDATE memory_users SET memories = memories - 1, total_terms = total_terms - cardinality(OLD.terms)
         WHERE tenant = OLD.tenant AND user_id = OLD.user_id;
    END IF;
    IF TG_OP IN ('INSERT', 'UPDATE') THEN
        INSERT INTO memory_terms (tenant, user_id, term, df)
        SELECT NEW.tenant, NEW.user_id, t, 1 FROM unnest(NEW.terms) AS t
        ON CONFLICT (tenant, user_id, term) DO UPDATE SET df = memory_terms.df + 1;
        INSERT INTO memory_users (tenant, user_id, memories, total_terms)
        VALUES (NEW.tenant, NEW.user_id, 1, cardinality(NEW.terms))
        ON CONFLICT (tenant, user_id) DO UPDATE
            SET memories = memory_users.memories + 1,
                total_terms = memory_users.total_terms + cardinality(NEW.terms);
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER memories_term_stats
    AFTER INSERT OR DELETE OR UPDATE OF terms ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_keep_term_stats();

INSERT INTO memory_terms (tenant, user_id, term, df)
SELECT tenant, user_id, t, count(*) FROM memories, unnest(terms) AS t GROUP BY 1, 2, 3;
INSERT INTO memory_users (tenant, user_id, memories, total_terms)
SELECT tenant, user_id, count(*), sum(cardinality(terms)) FROM memories GROUP BY 1, 2;
