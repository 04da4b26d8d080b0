//! Bringing a data directory to the current format: refusing unknown
//! formats, migrating older ones in place, and rebuilding the derived
//! indexes (also after an interrupted import).

use crate::io;
use crate::journal::{Batches, FjallJournal};
use crate::layout::Op;
use crate::layout::{
    FORMAT, FORMAT_2, FORMAT_3, FORMAT_4, Space, counters_value, decode_record, edge_in_key, head_value, item_ops,
    key_of, postings_ops, u64_at,
};
use fjall::PersistMode;
use std::collections::HashMap;
use tideway_core::{Item, Millis, UserId};
use tideway_store::{Counters, EdgeKind, Head, StoreError};

impl FjallJournal {
    /// Brings the directory to [`FORMAT`]: a new one is initialised, one of
    /// `tideway-2` or `tideway-3` is migrated in place, one whose import was
    /// interrupted has its derived indexes rebuilt, any other is refused.
    pub(crate) fn ensure_format(&self) -> Result<(), StoreError> {
        let format = self.meta.get("format").map_err(io)?;
        match format.as_deref() {
            Some(v) if v == FORMAT => {
                if self.meta.contains_key("rebuild").map_err(io)? {
                    tracing::warn!("an import into this directory was interrupted: rebuilding its derived indexes");
                    self.build_derived()?;
                    self.meta.remove("rebuild").map_err(io)?;
                    self.db.persist(PersistMode::SyncAll).map_err(io)?;
                }
            }
            Some(v) if v == FORMAT_2 || v == FORMAT_3 || v == FORMAT_4 => {
                if v == FORMAT_2 {
                    self.migrate_from_2()?;
                    self.meta.insert("format", FORMAT_3).map_err(io)?;
                    self.db.persist(PersistMode::SyncAll).map_err(io)?;
                }
                if v != FORMAT_4 {
                    self.build_derived()?;
                    self.meta.insert("format", FORMAT_4).map_err(io)?;
                    self.db.persist(PersistMode::SyncAll).map_err(io)?;
                }
                self.build_postings()?;
                self.meta.insert("format", FORMAT).map_err(io)?;
                self.db.persist(PersistMode::SyncAll).map_err(io)?;
            }
            Some(v) => {
                return Err(StoreError::config(
                    crate::DATA_DIR,
                    format!(
                        "data directory has format {:?}, this build reads {:?} (and migrates {:?}, {:?} and {:?})",
                        String::from_utf8_lossy(v),
                        String::from_utf8_lossy(FORMAT),
                        String::from_utf8_lossy(FORMAT_2),
                        String::from_utf8_lossy(FORMAT_3),
                        String::from_utf8_lossy(FORMAT_4),
                    ),
                ));
            }
            None => {
                self.meta.insert("format", FORMAT).map_err(io)?;
                self.meta.insert("counters", counters_value(&Counters::default())).map_err(io)?;
                self.db.persist(PersistMode::SyncAll).map_err(io)?;
            }
        }
        Ok(())
    }

    /// Posts every stored item to its feeds (a directory written before
    /// postings existed); idempotent, so a crash midway is finished by the
    /// next open.
    fn build_postings(&self) -> Result<(), StoreError> {
        tracing::info!("building the mention, tag and object feeds' postings from the stored items");
        let started = std::time::Instant::now();
        let mut out = Batches { j: self, ops: Vec::new() };
        let mut n = 0u64;
        for g in self.items.iter() {
            let (k, v) = g.into_inner().map_err(io)?;
            let item = decode_record(tideway_core::ItemId(u64_at(&k, 0)?), &v)?;
            let mut ops = Vec::new();
            postings_ops(&item, &mut ops);
            for op in ops {
                out.push(op)?;
            }
            n += 1;
        }
        out.finish()?;
        tracing::info!(items = n, elapsed_ms = started.elapsed().as_millis() as u64, "postings built");
        Ok(())
    }

    /// Rewrites a `tideway-2` directory's items (whole records, replayed at
    /// start-up) into records, bodies and index keyspaces, in batches;
    /// idempotent, so a crash midway is finished by the next open.
    fn migrate_from_2(&self) -> Result<(), StoreError> {
        tracing::info!("migrating the data directory from tideway-2 (items leave the start-up path)");
        let started = std::time::Instant::now();
        let mut out = Batches { j: self, ops: Vec::new() };
        let mut n = 0u64;
        for g in self.items.iter() {
            let (_, v) = g.into_inner().map_err(io)?;
            let item: Item = serde_json::from_slice(&v).map_err(|e| StoreError::corrupt_by("item", e))?;
            let mut ops = Vec::new();
            item_ops(&item, true, &mut ops)?;
            for op in ops {
                out.push(op)?;
            }
            n += 1;
        }
        out.finish()?;
        tracing::info!(items = n, secs = started.elapsed().as_secs_f64(), "migrated the items");
        Ok(())
    }

    /// Writes what is derived from the edges, outboxes, insertions and
    /// promotions: the reverse edges, every user's counters, the insertions
    /// by user and the store-wide counters. Idempotent (it recounts
    /// everything): run on a directory of format 3 and after an interrupted
    /// import. One pass over those keyspaces, with the users' counters in
    /// memory.
    fn build_derived(&self) -> Result<(), StoreError> {
        tracing::info!("building the derived indexes (reverse edges, per-user counters)");
        let started = std::time::Instant::now();
        let mut heads: HashMap<u64, Head> = HashMap::new();
        let mut c = Counters::default();
        let mut out = Batches { j: self, ops: Vec::new() };
        for g in self.users.iter() {
            heads.entry(u64_at(&g.key().map_err(io)?, 0)?).or_default();
        }
        for g in self.edges.iter() {
            let (k, v) = g.into_inner().map_err(io)?;
            let (from, to) = (u64_at(&k, 1)?, u64_at(&k, 9)?);
            let kind = match k.first() {
                Some(b'f') => EdgeKind::Follow,
                Some(b'b') => EdgeKind::Block,
                Some(b'm') => EdgeKind::Mute,
                other => return Err(StoreError::corrupt(format!("edge kind {other:?}"))),
            };
            let since = Millis(i64::try_from(u64_at(&v, 0)?).unwrap_or(0));
            if kind == EdgeKind::Follow {
                heads.entry(from).or_default().following += 1;
                heads.entry(to).or_default().followers += 1;
                c.follows += 1;
            } else {
                heads.entry(from).or_default();
                heads.entry(to).or_default();
            }
            if let Some(rk) = edge_in_key(kind, UserId(from), UserId(to), since) {
                out.push(Op::Put(Space::EdgesIn, rk, Vec::new()))?;
            }
        }
        for g in self.outbox.iter() {
            let (k, v) = g.into_inner().map_err(io)?;
            let (author, id) = (u64_at(&k, 0)?, u64_at(&k, 8)?);
            let h = heads.entry(author).or_default();
            h.note_key(id);
            if v.first() == Some(&1) {
                h.items += 1;
                c.items_live += 1;
            }
            c.max_key = c.max_key.max(id);
        }
        for g in self.inserts.iter() {
            let (k, v) = g.into_inner().map_err(io)?;
            let (key, user, item) = (u64_at(&k, 0)?, u64_at(&v, 0)?, u64_at(&v, 8)?);
            heads.entry(user).or_default();
            c.max_key = c.max_key.max(key);
            out.push(Op::Put(Space::UserInserts, key_of(&[user, key]), key_of(&[item])))?;
        }
        for g in self.promotions.iter() {
            c.max_key = c.max_key.max(u64_at(&g.key().map_err(io)?, 0)?);
        }
        c.users = heads.len() as u64;
        for (u, h) in &heads {
            out.push(Op::Put(Space::Users, key_of(&[*u]), head_value(h)))?;
        }
        out.push(Op::Put(Space::Meta, b"counters".to_vec(), counters_value(&c)))?;
        out.finish()?;
        tracing::info!(
            users = c.users,
            follows = c.follows,
            items = c.items_live,
            secs = started.elapsed().as_secs_f64(),
            "built the derived indexes"
        );
        Ok(())
    }
}
