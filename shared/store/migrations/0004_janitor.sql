-- The janitor (services/janitor): what a weekly run needs to be exact,
-- resumable and reversible.

-- When a run last decayed the memory's importance: the next run decays only
-- the idle time since, so weekly runs compose (and a resumed run, which keeps
-- its clock, decays nothing twice).
ALTER TABLE memories ADD COLUMN decayed_at timestamptz;
-- The memory a run folded this one into (a merge survivor or a consolidated
-- summary); the folded memory is archived.
ALTER TABLE memories ADD COLUMN merged_into uuid REFERENCES memories (id) ON DELETE SET NULL;
-- A purged memory must not take its supersessors with it.
ALTER TABLE memories DROP CONSTRAINT memories_superseded_by_fkey,
    ADD CONSTRAINT memories_superseded_by_fkey FOREIGN KEY (superseded_by) REFERENCES memories (id) ON DELETE SET NULL;
-- Room in each page for the weekly decay to update a row in place (a HOT
-- update touches no index), instead of adding entries to every index.
ALTER TABLE memories SET (fillfactor = 80);
-- The steps scan active memories per user, and the purge archived ones by age.
CREATE INDEX memories_archived_at ON memories (archived_at) WHERE status IN ('archived', 'deleted');

ALTER TABLE maintenance_runs
    -- The run's clock: every decision of the run (and of a resumed run) is taken at this instant.
    ADD COLUMN as_of          timestamptz,
    -- The schedule slot it serves (NULL for a run asked for by hand).
    ADD COLUMN scheduled_for  timestamptz,
    ADD COLUMN trigger        text NOT NULL DEFAULT 'manual' CHECK (trigger IN ('schedule', 'startup', 'manual')),
    ADD COLUMN host           text;
UPDATE maintenance_runs SET as_of = started_at WHERE as_of IS NULL;
ALTER TABLE maintenance_runs ALTER COLUMN as_of SET NOT NULL;
ALTER TABLE maintenance_runs DROP CONSTRAINT maintenance_runs_status_check,
    ADD CONSTRAINT maintenance_runs_status_check
        CHECK (status IN ('running', 'finished', 'failed', 'interrupted', 'restored'));
-- One real run per schedule slot, whatever the number of janitors.
CREATE UNIQUE INDEX maintenance_runs_one_per_slot ON maintenance_runs (scheduled_for)
    WHERE NOT dry_run AND scheduled_for IS NOT NULL;
CREATE INDEX maintenance_runs_latest ON maintenance_runs (started_at DESC);
