//! The retention steps of a run: review (quarantined memories nobody
//! released are archived), purge (memories no longer current are exported,
//! then deleted) and turns (old turns of the archive are exported, then
//! emptied or deleted). Every export is written and synced before the
//! change it backs commits; a dry run exports nothing and changes nothing.

use hindsight_core::memory::Status;
use hindsight_store::maintenance::{
    retention::{self, OldTurn, TurnPosition, TurnStep},
    steps::{self, Archive, PurgeClass},
};
use sqlx::{Connection, PgConnection};
use uuid::Uuid;

use crate::{
    exec::{Exec, archived, state},
    policy,
    request::JanitorError,
};

impl Exec<'_> {
    /// Archives quarantined memories whose review period has ended.
    pub(crate) async fn review(&mut self, conn: &mut PgConnection) -> Result<(), JanitorError> {
        let before = self.as_of - self.policy().quarantine_review;
        loop {
            let page =
                steps::review_candidates(conn, self.tenant.as_deref(), before, self.janitor.chunk)
                    .await?;
            let archived: Vec<Archive> = page
                .iter()
                .filter(|r| policy::review_ends(self.policy(), &state(r), self.as_of))
                .map(archived)
                .collect();
            if archived.is_empty() {
                return Ok(());
            }
            let mut tx = conn.begin().await?;
            steps::apply_archive(&mut tx, self.id, self.as_of, "archive", &archived).await?;
            for a in &archived {
                self.counts.record(&a.tenant, |c| c.reviewed += 1);
            }
            self.commit(tx).await?;
        }
    }

    /// Exports and deletes memories past their retention: archived, deleted,
    /// superseded, each class read in the order of its clock.
    pub(crate) async fn purge(&mut self, conn: &mut PgConnection) -> Result<(), JanitorError> {
        for class in PurgeClass::ALL {
            let retention = match class {
                PurgeClass::Deleted => self.policy().deleted_retention,
                PurgeClass::Archived | PurgeClass::Superseded => self.policy().retention,
            };
            let before = self.as_of - retention;
            loop {
                let page = steps::purge_candidates(
                    conn,
                    self.tenant.as_deref(),
                    class,
                    before,
                    self.janitor.chunk,
                )
                .await?;
                let purged: Vec<(Uuid, String, Status)> = page
                    .iter()
                    .filter(|r| policy::purges(self.policy(), &state(r), self.as_of))
                    .map(|r| (r.id, r.tenant.clone(), r.status))
                    .collect();
                if purged.is_empty() {
                    break;
                }
                let ids: Vec<Uuid> = purged.iter().map(|p| p.0).collect();
                // Exported (and synced to disk) before anything is deleted; a
                // dry run writes no export.
                if !self.dry_run {
                    let rows = steps::export_rows(conn, &ids).await?;
                    self.export.append(&rows).await?;
                }
                let keys: Vec<(Uuid, String)> =
                    purged.iter().map(|(id, t, _)| (*id, t.clone())).collect();
                let mut tx = conn.begin().await?;
                steps::apply_purge(&mut tx, self.id, &keys, &self.export.name()).await?;
                for (_, tenant, status) in &purged {
                    let superseded = u64::from(*status == Status::Superseded);
                    self.counts.record(tenant, |c| {
                        c.purged += 1;
                        c.purged_superseded += superseded;
                    });
                }
                self.commit(tx).await?;
            }
        }
        Ok(())
    }

    /// Deletes turns past the turns' retention, then empties those past the
    /// content's: each exported first. Deleting first spares emptying a turn
    /// about to go.
    pub(crate) async fn turns(&mut self, conn: &mut PgConnection) -> Result<(), JanitorError> {
        self.old_turns(conn, TurnStep::Purge).await?;
        self.old_turns(conn, TurnStep::Empty).await
    }

    async fn old_turns(
        &mut self,
        conn: &mut PgConnection,
        step: TurnStep,
    ) -> Result<(), JanitorError> {
        let retention = match step {
            TurnStep::Purge => self.policy().turn_retention,
            TurnStep::Empty => self.policy().turn_content_retention,
        };
        let before = self.as_of - retention;
        // Turns are small rows without audit events: four chunks' worth a
        // page, so that each export is synced a quarter as often.
        let (tenant, page_size, lines) =
            (self.tenant.clone(), self.janitor.chunk * 4, !self.dry_run);
        let read = async |c: &mut PgConnection, from: Option<TurnPosition>| {
            retention::old_turns(
                c,
                step,
                tenant.as_deref(),
                before,
                from.as_ref(),
                page_size,
                lines,
            )
            .await
        };
        // In a real run the next page is read on the second connection while
        // this one is exported and written (the pages hold different turns).
        let mut reader = self.reader.take();
        let mut page = read(reader.as_mut().unwrap_or(&mut *conn), None).await;
        let result = loop {
            let current = match page {
                Ok(p) => p,
                Err(e) => break Err(e.into()),
            };
            let Some(last) = current.last() else {
                break Ok(());
            };
            let from = Some(last.position());
            let written = match reader.as_mut() {
                Some(r) => {
                    let (next, written) =
                        tokio::join!(read(r, from), self.old_turns_page(conn, step, current));
                    page = next;
                    written
                }
                None => {
                    let written = self.old_turns_page(conn, step, current).await;
                    page = read(conn, from).await;
                    written
                }
            };
            if let Err(e) = written {
                break Err(e);
            }
        };
        self.reader = reader;
        result
    }

    /// Exports the page's turns that are due, then empties or deletes them.
    async fn old_turns_page(
        &mut self,
        conn: &mut PgConnection,
        step: TurnStep,
        page: Vec<OldTurn>,
    ) -> Result<(), JanitorError> {
        let (policy, as_of) = (self.policy(), self.as_of);
        let (taken, lines): (Vec<OldTurn>, Vec<String>) = page
            .into_iter()
            .filter(|t| match step {
                TurnStep::Purge => policy::purges_turn(policy, t.received_at, as_of),
                TurnStep::Empty => policy::empties_turn(policy, t.received_at, as_of),
            })
            .map(|mut t| {
                let line = t.line.take().unwrap_or_default();
                (t, line)
            })
            .unzip();
        if taken.is_empty() {
            return Ok(());
        }
        if !self.dry_run {
            self.export.append_lines(lines).await?;
        }
        let mut tx = conn.begin().await?;
        let changed = match step {
            TurnStep::Purge => retention::delete_turns(&mut tx, &taken).await?,
            TurnStep::Empty => retention::empty_turns(&mut tx, &taken, self.as_of).await?,
        };
        // Counted by what the statement changed: a turn an erase took
        // meanwhile is not counted.
        for tenant in &changed {
            self.counts.record(tenant, |c| match step {
                TurnStep::Purge => c.turns_purged += 1,
                TurnStep::Empty => c.turns_emptied += 1,
            });
        }
        self.commit(tx).await
    }
}
