-- Keyword statistics change by what a memory's terms gained and lost.
--
-- The trigger of 0003 fires on every UPDATE that sets `terms`, and took every
-- old term out and every new one in, even when nothing changed. Persist sets
-- the terms on every merge, and most merges keep them or change a few, so a
-- merge cost two writes per term (about 50 at 25 terms): 6.7 ms an update,
-- nearly all of persist's time under a heavy merge load. Now an update with
-- the same terms and the same owner changes nothing, and one with new terms
-- writes only the difference.
CREATE OR REPLACE FUNCTION memories_keep_term_stats() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' THEN
        IF OLD.tenant = NEW.tenant AND OLD.user_id = NEW.user_id THEN
            IF OLD.terms = NEW.terms THEN
                RETURN NULL;
            END IF;
            UPDATE memory_terms SET df = df - 1
             WHERE tenant = OLD.tenant AND user_id = OLD.user_id
               AND term = ANY (ARRAY(SELECT unnest(OLD.terms) EXCEPT SELECT unnest(NEW.terms)));
            INSERT INTO memory_terms (tenant, user_id, term, df)
            SELECT NEW.tenant, NEW.user_id, t, 1
              FROM (SELECT unnest(NEW.terms) EXCEPT SELECT unnest(OLD.terms)) AS added(t)
            ON CONFLICT (tenant, user_id, term) DO UPDATE SET df = memory_terms.df + 1;
            UPDATE memory_users SET total_terms = total_terms - cardinality(OLD.terms) + cardinality(NEW.terms)
             WHERE tenant = NEW.tenant AND user_id = NEW.user_id;
            RETURN NULL;
        END IF;
    END IF;
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

-- A memory moved to another tenant or user moves its counts too.
DROP TRIGGER memories_term_stats ON memories;
CREATE TRIGGER memories_term_stats
    AFTER INSERT OR DELETE OR UPDATE OF terms, tenant, user_id ON memories
    FOR EACH ROW EXECUTE FUNCTION memories_keep_term_stats();
