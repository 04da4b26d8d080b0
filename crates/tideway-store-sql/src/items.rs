//! Items: creates (the rules are `tideway_store::rules::create`), updates,
//! records and bodies, outboxes, reposts by users, and home insertions.

use crate::post_writes::{self, MyRows, PostRow};
use crate::rows::Bind::{Int, Text};
use crate::rows::{in_list, int, item_of, k, record_json, text};
use crate::tx::{OrUnavailable, Tx, in_doubt, is_unique_violation};
use crate::{Dialect, SqlStore};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::Arc;
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::notify::Op;
use tideway_core::{Body, Item, ItemId, Key, Millis, UserId};
use tideway_store::rules::{self, CreateDecision, CreateFacts};
use tideway_store::{
    CreateOutcome, ItemChange, ItemCounts, Items, Postings, Promotion, Record, Result, StoreError, ViewerMarks,
};

/// Why a create attempt did not finish.
enum Failed {
    Store(StoreError),
    /// A unique index refused the row: an id taken, or a racing create with
    /// the same idempotency key.
    Duplicate,
}

impl From<StoreError> for Failed {
    fn from(e: StoreError) -> Self {
        Failed::Store(e)
    }
}

impl SqlStore {
    /// What the engine knows of `item` before storing it, read within `tx`
    /// in the order the rule looks at it (a later fact is not read once an
    /// earlier one resolves the create).
    async fn create_facts(&self, tx: &mut Tx, item: &Item) -> Result<CreateFacts> {
        let mut facts = CreateFacts::default();
        if let Some(key) = &item.idempotency_key {
            let sql = "SELECT record, body FROM tw_items WHERE author = ? AND idem = ?";
            if let Some(row) = self.rows_in(tx, sql, &[Int(k(item.author.0)), Text(key)]).await?.first() {
                facts.by_idempotency_key = Some(item_of(&text(row, 0)?, Some(&text(row, 1)?))?);
                return Ok(facts);
            }
        }
        if let Some(orig) = item.repost_of {
            let sql =
                "SELECT record, body FROM tw_items WHERE repost_of = ? AND author = ? AND live = 1 ORDER BY id LIMIT 1";
            if let Some(row) = self.rows_in(tx, sql, &[Int(k(orig.0)), Int(k(item.author.0))]).await?.first() {
                facts.earlier_repost = Some(item_of(&text(row, 0)?, Some(&text(row, 1)?))?);
            }
        }
        Ok(facts)
    }

    /// The item stored under `item`'s id when it is `item` itself
    /// (`rules::is_same_create`): an earlier attempt of this create that the
    /// engine committed though its answer was lost.
    async fn stored_create(&self, item: &Item) -> Result<Option<Arc<Item>>> {
        let rows = self.fetch("SELECT record, body FROM tw_items WHERE id = ?", &[k(item.id.0)]).await?;
        let Some(row) = rows.first() else { return Ok(None) };
        let stored = item_of(&text(row, 0)?, Some(&text(row, 1)?))?;
        Ok(rules::is_same_create(&stored, item).then_some(stored))
    }

    /// One attempt at a create: what the post writes (`post_writes.rs`).
    /// An item with nothing to resolve first (no idempotency key, not a
    /// repost) on PostgreSQL is one statement on the pool: one round trip,
    /// atomic as a whole; otherwise the facts are read and the item written
    /// in one transaction (on MySQL a statement per table).
    /// Its notification ops (`notify`) go in the same transaction; the
    /// users whose notification moves to fold are returned beside.
    async fn try_create(
        &self,
        item: &Item,
        fan_out: bool,
        now: Millis,
        notify: &[Op],
    ) -> std::result::Result<(CreateOutcome, Vec<UserId>), Failed> {
        // (A post that notifies someone is never the lone statement below.)
        let plain = item.idempotency_key.is_none() && item.repost_of.is_none() && notify.is_empty();
        let row = PostRow::new(item, fan_out, now)?;
        let full = post_writes::json([&row], true)?;
        let mut tx = None;
        if !plain || self.dialect == Dialect::MySql {
            let mut t = self.begin().await?;
            if let CreateDecision::Resolved(found) = rules::create(self.create_facts(&mut t, item).await?) {
                return Ok((found, vec![]));
            }
            tx = Some(t);
        }
        let duplicate =
            |e: sqlx::Error| if is_unique_violation(&e) { Failed::Duplicate } else { Failed::Store(self.err()(e)) };
        match self.dialect {
            Dialect::Postgres => {
                let q = sqlx::query(post_writes::pg_text()).bind(full.as_str());
                match &mut tx {
                    Some(t) => q.execute(&mut **t).await,
                    None => q.execute(&self.pool).await,
                }
                .map_err(duplicate)?;
            }
            Dialect::MySql => {
                // (Always begun above: the facts are read in it.)
                let mut t = match tx.take() {
                    Some(t) => t,
                    None => self.begin().await?,
                };
                let bare = post_writes::json([&row], false)?;
                for (n, (sql, reads_full)) in post_writes::my_steps(&[&row], MyRows::Bound).into_iter().enumerate() {
                    let json = if reads_full { &full } else { &bare };
                    let done = sqlx::query(sql).bind(json.as_str()).execute(&mut *t).await;
                    // (The item's row first: a unique index refusing it is a duplicate.)
                    if n == 0 {
                        done.map_err(duplicate)?;
                    } else {
                        done.or_unavailable(self)?;
                    }
                }
                tx = Some(t);
            }
        }
        let mut fold = vec![];
        if let Some(mut t) = tx {
            fold = self.notify_in(&mut t, notify).await?;
            self.commit(t).await?;
        }
        Ok((CreateOutcome::Created(Arc::new(item.clone())), fold))
    }

    /// Keys in `range` from `sql` (which ends in a WHERE clause on `col`).
    pub(crate) async fn range_keys(
        &self,
        select: &str,
        col: &str,
        binds: &[i64],
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<Key>> {
        let mut sql = select.to_owned();
        let mut b = binds.to_vec();
        if let Some(a) = range.above {
            sql.push_str(&format!(" AND {col} > ?"));
            b.push(k(a));
        }
        if let Some(x) = range.below {
            sql.push_str(&format!(" AND {col} < ?"));
            b.push(k(x));
        }
        let order = match dir {
            Direction::Older => "DESC",
            Direction::Newer => "ASC",
        };
        // The limit is spelled, not bound: PostgreSQL's generic plan for a
        // bound limit does not know it is small, and returning readers' inbox
        // rebuilds (limit 800) took twice as long with it (`bench-nodes`).
        sql.push_str(&format!(" ORDER BY {col} {order} LIMIT {limit}"));
        let rows = self.fetch(&sql, &b).await?;
        rows.iter().map(|r| Ok(int(r, 0)? as u64)).collect()
    }
}

#[async_trait]
impl Postings for SqlStore {
    async fn postings(&self, feed: u64, range: KeyRange, dir: Direction, limit: usize) -> Result<Vec<Key>> {
        if limit == 0 {
            return Ok(vec![]);
        }
        self.range_keys("SELECT item FROM tw_postings WHERE feed = ?", "item", &[feed as i64], range, dir, limit).await
    }
}

#[async_trait]
impl Items for SqlStore {
    async fn create_item_notifying(
        &self,
        item: Item,
        fan_out: bool,
        now: Millis,
        notify: &[Op],
    ) -> Result<CreateOutcome> {
        // A post with nothing to resolve and no one to notify goes with
        // whatever others are being posted at once; alone only if its batch
        // failed. A batch that failed may still have been committed, its
        // answer lost on a broken link: the row under the item's id says
        // so, below (with its notifications: one transaction).
        if crate::posts::batchable(&item) && notify.is_empty() && self.posts.write(&item, fan_out, now).await? {
            return Ok(CreateOutcome::Created(Arc::new(item)));
        }
        let mut again = true;
        loop {
            let tried = self
                .retrying(|| async {
                    match self.try_create(&item, fan_out, now, notify).await {
                        Ok((outcome, fold)) => {
                            self.fold_after(&fold).await;
                            Ok(Ok(outcome))
                        }
                        Err(Failed::Store(e)) => Err(e),
                        Err(Failed::Duplicate) => Ok(Err(())),
                    }
                })
                .await;
            let doubt = match tried {
                // An earlier attempt of this very create, found by its
                // idempotency key, is this create done.
                Ok(Ok(CreateOutcome::Existing(found))) if found.id == item.id => {
                    return Ok(CreateOutcome::Created(found));
                }
                Ok(Ok(outcome)) => return Ok(outcome),
                // A unique index refused the row: this create's own earlier
                // attempt (committed, its answer lost), a racing create with
                // the same idempotency key (return it), or the id is taken.
                Ok(Err(())) => {
                    if let Some(stored) = self.stored_create(&item).await? {
                        return Ok(CreateOutcome::Created(stored));
                    }
                    let mut tx = self.begin().await?;
                    let facts = CreateFacts { id_taken: true, ..self.create_facts(&mut tx, &item).await? };
                    return match rules::create(facts) {
                        CreateDecision::Resolved(found) => Ok(found),
                        CreateDecision::IdTaken | CreateDecision::Store => Err(StoreError::IdTaken(item.id.0)),
                    };
                }
                Err(e) if again && in_doubt(&e) => e,
                Err(e) => return Err(e),
            };
            // The link broke with the outcome unknown. What the engine
            // holds decides, never a write under a new id: this create
            // stored is done; nothing under its id is written once more
            // under the same id (a commit still on its way then meets the
            // unique index, and is found above).
            match self.stored_create(&item).await {
                Ok(Some(stored)) => return Ok(CreateOutcome::Created(stored)),
                Ok(None) => again = false,
                Err(_) => return Err(doubt),
            }
        }
    }

    async fn update_item_notifying(&self, id: ItemId, change: &ItemChange, notify: &[Op]) -> Result<Option<Arc<Item>>> {
        let changed = self
            .retrying(|| async move {
                let mut tx = self.begin().await?;
                let rows = self
                    .rows_in(&mut tx, "SELECT record, body FROM tw_items WHERE id = ? FOR UPDATE", &[Int(k(id.0))])
                    .await?;
                let Some(row) = rows.first() else { return Ok(None) };
                let (r, b) = (text(row, 0)?, text(row, 1)?);
                let item = item_of(&r, Some(&b))?;
                if item.deleted {
                    return Ok(None);
                }
                let new = Arc::new(change.apply(&item));
                let (record, body) = record_json(&new)?;
                // `rev` moves with every change: nodes holding a copy of the
                // item check it (`pages.rs`).
                self.exec_in(
                    &mut tx,
                    "UPDATE tw_items SET live = ?, record = ?, body = ?, rev = ? WHERE id = ?",
                    &[Int(i64::from(!new.deleted)), Text(&record), Text(&body), Int(i64::from(new.rev)), Int(k(id.0))],
                )
                .await?;
                if new.deleted {
                    self.bump(&mut tx, "items", -1, &[new.author]).await?;
                    self.bump_parents(&mut tx, &new, -1).await?;
                }
                // And the item epoch: copies found current before it moved are
                // checked one by one again (`pages.rs`). Last, so its row lock,
                // which every change waits for, is held the shortest.
                self.exec_in(&mut tx, "UPDATE tw_epoch SET n = n + 1 WHERE id = 1", &[]).await?;
                // Its notifications last: their lock rows are the last taken.
                let fold = self.notify_in(&mut tx, notify).await?;
                self.commit(tx).await?;
                Ok(Some((new, fold)))
            })
            .await?;
        Ok(match changed {
            Some((new, fold)) => {
                self.fold_after(&fold).await;
                Some(new)
            }
            None => None,
        })
    }

    async fn records(&self, keys: &[Key]) -> Result<Vec<Option<Record>>> {
        if keys.is_empty() {
            return Ok(vec![]);
        }
        let (m, binds) = in_list(keys.iter().map(|x| k(*x)));
        let mut found: HashMap<u64, Record> = HashMap::new();
        // Records come whole, bodies included (same row): a page needs no
        // second call for them.
        for row in self.fetch(&format!("SELECT id, record, body FROM tw_items WHERE id IN ({m})"), &binds).await? {
            let id = int(&row, 0)?;
            let (r, b) = (text(&row, 1)?, text(&row, 2)?);
            found.insert(id as u64, Record::Item(item_of(&r, Some(&b))?));
        }
        if found.len() < keys.len() {
            let sql = format!("SELECT k, user_id, item FROM tw_inserts WHERE k IN ({m})");
            for row in self.fetch(&sql, &binds).await? {
                let key = int(&row, 0)? as u64;
                let user = UserId(int(&row, 1)? as u64);
                let item = ItemId(int(&row, 2)? as u64);
                found.insert(key, Record::Insert { key, user, item });
            }
        }
        Ok(keys.iter().map(|x| found.get(x).cloned()).collect())
    }

    async fn bodies(&self, ids: &[ItemId]) -> Result<Vec<Option<Body>>> {
        if ids.is_empty() {
            return Ok(vec![]);
        }
        let (m, binds) = in_list(ids.iter().map(|i| k(i.0)));
        let mut found: HashMap<u64, Body> = HashMap::new();
        for row in self.fetch(&format!("SELECT id, body FROM tw_items WHERE id IN ({m})"), &binds).await? {
            let b = text(&row, 1)?;
            let body = Body::from_json(b.as_bytes()).map_err(|e| StoreError::corrupt_by("an item body", e))?;
            found.insert(int(&row, 0)? as u64, body);
        }
        Ok(ids.iter().map(|i| found.get(&i.0).cloned()).collect())
    }

    async fn outbox_merge(
        &self,
        authors: &[UserId],
        range: KeyRange,
        dir: Direction,
        limit: usize,
    ) -> Result<Vec<Key>> {
        if authors.is_empty() || limit == 0 {
            return Ok(vec![]);
        }
        let (m, binds) = in_list(authors.iter().map(|a| k(a.0)));
        let select = format!("SELECT id FROM tw_items WHERE author IN ({m})");
        self.range_keys(&select, "id", &binds, range, dir, limit).await
    }

    async fn reposts_by(&self, originals: &[ItemId], reposters: &[UserId]) -> Result<Vec<Vec<(UserId, ItemId)>>> {
        if originals.is_empty() || reposters.is_empty() {
            return Ok(vec![Vec::new(); originals.len()]);
        }
        let (mo, mut binds) = in_list(originals.iter().map(|o| k(o.0)));
        let (mr, rb) = in_list(reposters.iter().map(|r| k(r.0)));
        binds.extend(rb);
        // On MySQL the reposters are a filter, not ranges: MariaDB built a
        // range per (original, reposter) pair on the `(repost_of, author)`
        // index (50 × 101 for a page of 20 on a 100-follow graph), 1.1 ms a
        // statement against 0.36 ms over the originals' ranges alone. That
        // reads every live repost of the page's originals.
        let author = match self.dialect {
            Dialect::MySql => "(author + 0)",
            Dialect::Postgres => "author",
        };
        let sql = format!(
            "SELECT repost_of, author, id FROM tw_items WHERE repost_of IN ({mo}) AND {author} IN ({mr}) AND live = 1 ORDER BY id"
        );
        let mut by: HashMap<u64, Vec<(UserId, ItemId)>> = HashMap::new();
        for row in self.fetch(&sql, &binds).await? {
            by.entry(int(&row, 0)? as u64)
                .or_default()
                .push((UserId(int(&row, 1)? as u64), ItemId(int(&row, 2)? as u64)));
        }
        Ok(originals.iter().map(|o| by.remove(&o.0).unwrap_or_default()).collect())
    }

    async fn hydration(
        &self,
        ids: &[ItemId],
        viewer: Option<UserId>,
    ) -> Result<Vec<(ItemCounts, Option<ViewerMarks>)>> {
        self.read_hydration(ids, viewer).await
    }

    async fn set_reaction(
        &self,
        item: ItemId,
        user: UserId,
        kind: &str,
        on: bool,
        notify: &[tideway_core::notify::Op],
    ) -> Result<bool> {
        // The reaction, its count and its notifications in one transaction:
        // one commit, and a notification never missing beside its reaction.
        let (changed, fold) = self
            .retrying(|| async {
                let mut tx = self.begin().await?;
                let changed = self.write_reaction(&mut tx, item, user, kind, on).await?;
                let fold = self.notify_in(&mut tx, notify).await?;
                self.commit(tx).await?;
                Ok((changed, fold))
            })
            .await?;
        self.fold_after(&fold).await;
        Ok(changed)
    }

    async fn create_promotion(&self, p: Promotion) -> Result<()> {
        self.put_promotion(p).await
    }

    async fn active_promotions(&self, now: Millis) -> Result<Vec<Promotion>> {
        self.read_promotions(now).await
    }

    async fn promotions_not_ended(&self, from: Millis) -> Result<Vec<Promotion>> {
        let mut list = self.promotions_from(from).await?.1;
        list.sort_unstable_by_key(|p| p.id);
        Ok(list)
    }

    async fn insert_home(&self, user: UserId, item: ItemId, key: Key) -> Result<()> {
        self.retrying(|| async move {
            let mut tx = self.begin().await?;
            self.exec_in(
                &mut tx,
                "INSERT INTO tw_inserts (k, user_id, item) VALUES (?, ?, ?)",
                &[Int(k(key)), Int(k(user.0)), Int(k(item.0))],
            )
            .await?;
            // (a node's copy of the owner's relations says whether it has
            // insertions to look for)
            self.move_versions(&mut tx, &[user]).await?;
            self.commit(tx).await?;
            Ok(())
        })
        .await
    }

    async fn inserts(&self, user: UserId, range: KeyRange, dir: Direction, limit: usize) -> Result<Vec<Key>> {
        self.range_keys("SELECT k FROM tw_inserts WHERE user_id = ?", "k", &[k(user.0)], range, dir, limit).await
    }

    async fn inserted_keys(&self, user: UserId, items: &[ItemId]) -> Result<Vec<Option<Key>>> {
        if items.is_empty() {
            return Ok(vec![]);
        }
        let (m, ib) = in_list(items.iter().map(|i| k(i.0)));
        let mut binds = vec![k(user.0)];
        binds.extend(ib);
        let sql = format!("SELECT item, MIN(k) FROM tw_inserts WHERE user_id = ? AND item IN ({m}) GROUP BY item");
        let found: HashMap<u64, u64> = self
            .fetch(&sql, &binds)
            .await?
            .iter()
            .map(|r| Ok((int(r, 0)? as u64, int(r, 1)? as u64)))
            .collect::<Result<_>>()?;
        Ok(items.iter().map(|i| found.get(&i.0).copied()).collect())
    }
}
