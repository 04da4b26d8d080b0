//! Backends that forward every call of the seam to other backends:
//! [`Split`](crate::Split) (the durable traits to one engine, the shared ones
//! to another) and [`Counted`](crate::Counted) (every call counted, and seen
//! by a hook, before it reaches the backend it wraps).
//!
//! [`forward_backend!`] spells every trait method once, so a method added to
//! the seam is forwarded by every such backend from this one place.

/// Implements every storage trait for `$ty` by forwarding: the durable
/// traits (`Items`, `Pages`, `Postings`, `Notifications`, `Live`, `Graph`, `Jobs`) to `$durable`, the
/// shared ones (`Activity`, `HotAuthors`, `Inboxes`, `Hub`, `Snapshots`, `Removals`) to `$shared`, after running
/// `$before` if given (a closure over `$s`, which names `self`, called with the
/// method's name).
macro_rules! forward_backend {
    ($ty:ty, $s:ident => durable: $durable:expr, shared: $shared:expr $(, before: $before:expr)?) => {
        forward_backend!(@all $ty, $s => durable: $durable, facts: $durable, shared: $shared $(, before: $before)?);
    };
    // The writes that change an item's page facts and the page's read go to
    // `$facts` (inherent methods of the same names and signatures), the
    // rest of the durable traits to `$durable`.
    ($ty:ty, $s:ident => durable: $durable:expr, facts: $facts:expr, shared: $shared:expr) => {
        forward_backend!(@all $ty, $s => durable: $durable, facts: $facts, shared: $shared);
    };
    (@all $ty:ty, $s:ident => durable: $durable:expr, facts: $facts:expr, shared: $shared:expr $(, before: $before:expr)?) => {
        const _: () = {
            use std::sync::Arc;
            use tideway_core::merge::{Direction, KeyRange};
            use tideway_core::{Body, ItemId, Key, Millis, Relation, UserId};
            use $crate::traits::{Job, Promotion, Record};
            use $crate::traits::*;
            #[async_trait::async_trait]
            impl Items for $ty {
                async fn create_item_notifying(
                    &self,
                    item: tideway_core::Item,
                    fan_out: bool,
                    now: Millis,
                    notify: &[tideway_core::notify::Op],
                ) -> Result<CreateOutcome> {
                    let $s = self;
                    $(($before)(stringify!(create_item));)?
                    $facts.create_item_notifying(item, fan_out, now, notify).await
                }
                async fn update_item_notifying(
                    &self,
                    id: ItemId,
                    change: &ItemChange,
                    notify: &[tideway_core::notify::Op],
                ) -> Result<Option<Arc<tideway_core::Item>>> {
                    let $s = self;
                    $(($before)(stringify!(update_item));)?
                    $facts.update_item_notifying(id, change, notify).await
                }
                async fn records(&self, keys: &[Key]) -> Result<Vec<Option<Record>>> {
                    let $s = self;
                    $(($before)(stringify!(records));)?
                    $durable.records(keys).await
                }
                async fn bodies(&self, ids: &[ItemId]) -> Result<Vec<Option<Body>>> {
                    let $s = self;
                    $(($before)(stringify!(bodies));)?
                    $durable.bodies(ids).await
                }
                async fn outbox_merge(
                    &self,
                    authors: &[UserId],
                    range: KeyRange,
                    dir: Direction,
                    limit: usize,
                ) -> Result<Vec<Key>> {
                    let $s = self;
                    $(($before)(stringify!(outbox_merge));)?
                    $durable.outbox_merge(authors, range, dir, limit).await
                }
                async fn reposts_by(
                    &self,
                    originals: &[ItemId],
                    reposters: &[UserId],
                ) -> Result<Vec<Vec<(UserId, ItemId)>>> {
                    let $s = self;
                    $(($before)(stringify!(reposts_by));)?
                    $durable.reposts_by(originals, reposters).await
                }
                async fn hydration(
                    &self,
                    ids: &[ItemId],
                    viewer: Option<UserId>,
                ) -> Result<Vec<(ItemCounts, Option<ViewerMarks>)>> {
                    let $s = self;
                    $(($before)(stringify!(hydration));)?
                    $durable.hydration(ids, viewer).await
                }
                async fn set_reaction(
                    &self,
                    item: ItemId,
                    user: UserId,
                    kind: &str,
                    on: bool,
                    notify: &[tideway_core::notify::Op],
                ) -> Result<bool> {
                    let $s = self;
                    $(($before)(stringify!(set_reaction));)?
                    $facts.set_reaction(item, user, kind, on, notify).await
                }
                async fn create_promotion(&self, p: Promotion) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(create_promotion));)?
                    $facts.create_promotion(p).await
                }
                async fn active_promotions(&self, now: Millis) -> Result<Vec<Promotion>> {
                    let $s = self;
                    $(($before)(stringify!(active_promotions));)?
                    $durable.active_promotions(now).await
                }
                async fn promotions_not_ended(&self, from: Millis) -> Result<Vec<Promotion>> {
                    let $s = self;
                    $(($before)(stringify!(promotions_not_ended));)?
                    $durable.promotions_not_ended(from).await
                }
                async fn insert_home(&self, user: UserId, item: ItemId, key: Key) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(insert_home));)?
                    $facts.insert_home(user, item, key).await
                }
                async fn inserts(
                    &self,
                    user: UserId,
                    range: KeyRange,
                    dir: Direction,
                    limit: usize,
                ) -> Result<Vec<Key>> {
                    let $s = self;
                    $(($before)(stringify!(inserts));)?
                    $durable.inserts(user, range, dir, limit).await
                }
                async fn inserted_keys(&self, user: UserId, items: &[ItemId]) -> Result<Vec<Option<Key>>> {
                    let $s = self;
                    $(($before)(stringify!(inserted_keys));)?
                    $durable.inserted_keys(user, items).await
                }
            }
            #[async_trait::async_trait]
            impl Pages for $ty {
                async fn page_facts(&self, q: &PageQuery<'_>) -> Result<PageFacts> {
                    let $s = self;
                    $(($before)(stringify!(page_facts));)?
                    $facts.page_facts(q).await
                }
            }
            #[async_trait::async_trait]
            impl Postings for $ty {
                async fn postings(
                    &self,
                    feed: u64,
                    range: KeyRange,
                    dir: Direction,
                    limit: usize,
                ) -> Result<Vec<Key>> {
                    let $s = self;
                    $(($before)(stringify!(postings));)?
                    $durable.postings(feed, range, dir, limit).await
                }
            }
            #[async_trait::async_trait]
            impl Notifications for $ty {
                async fn notify(&self, ops: &[tideway_core::notify::Op]) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(notify));)?
                    $durable.notify(ops).await
                }
                async fn notifications(
                    &self,
                    user: UserId,
                    before: Option<(Millis, u64)>,
                    limit: usize,
                ) -> Result<NotifyPage> {
                    let $s = self;
                    $(($before)(stringify!(notifications));)?
                    $durable.notifications(user, before, limit).await
                }
                async fn mark_notifications(
                    &self,
                    user: UserId,
                    mark: tideway_core::notify::Mark,
                    up_to: Option<u64>,
                ) -> Result<bool> {
                    let $s = self;
                    $(($before)(stringify!(mark_notifications));)?
                    $durable.mark_notifications(user, mark, up_to).await
                }
                async fn stored_causes(&self, after: &CausePos, limit: usize) -> Result<Vec<StoredCause>> {
                    let $s = self;
                    $(($before)(stringify!(stored_causes));)?
                    $durable.stored_causes(after, limit).await
                }
            }
            #[async_trait::async_trait]
            impl Live for $ty {
                async fn create_session(&self, session: tideway_core::live::Session, max_open: usize) -> Result<bool> {
                    let $s = self;
                    $(($before)(stringify!(create_session));)?
                    $durable.create_session(session, max_open).await
                }
                async fn move_session(&self, id: u64, step: tideway_core::live::Move, at: Millis) -> Result<Moved> {
                    let $s = self;
                    $(($before)(stringify!(move_session));)?
                    $durable.move_session(id, step, at).await
                }
                async fn sessions(&self, ids: &[u64]) -> Result<Vec<Option<tideway_core::live::Session>>> {
                    let $s = self;
                    $(($before)(stringify!(sessions));)?
                    $durable.sessions(ids).await
                }
                async fn open_sessions(&self, anchors: &[UserId]) -> Result<Vec<tideway_core::live::Session>> {
                    let $s = self;
                    $(($before)(stringify!(open_sessions));)?
                    $durable.open_sessions(anchors).await
                }
                async fn ended_sessions(
                    &self,
                    anchors: &[UserId],
                    below: (Millis, u64),
                    limit: usize,
                ) -> Result<Vec<tideway_core::live::Session>> {
                    let $s = self;
                    $(($before)(stringify!(ended_sessions));)?
                    $durable.ended_sessions(anchors, below, limit).await
                }
            }
            #[async_trait::async_trait]
            impl Graph for $ty {
                async fn follow_many_notifying(
                    &self,
                    user: UserId,
                    targets: &[UserId],
                    at: Millis,
                    max_following: usize,
                    notify: &[tideway_core::notify::Op],
                ) -> Result<Vec<FollowStatus>> {
                    let $s = self;
                    $(($before)(stringify!(follow_many));)?
                    $facts.follow_many_notifying(user, targets, at, max_following, notify).await
                }
                async fn unfollow_notifying(
                    &self,
                    user: UserId,
                    target: UserId,
                    notify: &[tideway_core::notify::Op],
                ) -> Result<bool> {
                    let $s = self;
                    $(($before)(stringify!(unfollow));)?
                    $facts.unfollow_notifying(user, target, notify).await
                }
                async fn set_block(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(set_block));)?
                    $facts.set_block(user, target, on, at).await
                }
                async fn set_mute(&self, user: UserId, target: UserId, on: bool, at: Millis) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(set_mute));)?
                    $facts.set_mute(user, target, on, at).await
                }
                async fn followees(&self, user: UserId) -> Result<Vec<UserId>> {
                    let $s = self;
                    $(($before)(stringify!(followees));)?
                    $durable.followees(user).await
                }
                async fn followees_versioned(&self, user: UserId) -> Result<Followees> {
                    let $s = self;
                    $(($before)(stringify!(followees_versioned));)?
                    $durable.followees_versioned(user).await
                }
                async fn followees_version(&self, user: UserId) -> Result<Option<u64>> {
                    let $s = self;
                    $(($before)(stringify!(followees_version));)?
                    $durable.followees_version(user).await
                }
                async fn list(
                    &self,
                    user: UserId,
                    which: ListKind,
                    after: Option<(Millis, UserId)>,
                    limit: usize,
                ) -> Result<Vec<(UserId, Millis)>> {
                    let $s = self;
                    $(($before)(stringify!(list));)?
                    $durable.list(user, which, after, limit).await
                }
                async fn followers_chunk(
                    &self,
                    user: UserId,
                    after: Option<FollowerPos>,
                    limit: usize,
                ) -> Result<Vec<FollowerPos>> {
                    let $s = self;
                    $(($before)(stringify!(followers_chunk));)?
                    $durable.followers_chunk(user, after, limit).await
                }
                async fn relations(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>> {
                    let $s = self;
                    $(($before)(stringify!(relations));)?
                    $durable.relations(user, others).await
                }
                async fn relations_unfollowed(&self, user: UserId, others: &[UserId]) -> Result<Vec<Relation>> {
                    let $s = self;
                    $(($before)(stringify!(relations_unfollowed));)?
                    $durable.relations_unfollowed(user, others).await
                }
                async fn counts(&self, user: UserId) -> Result<UserCounts> {
                    let $s = self;
                    $(($before)(stringify!(counts));)?
                    $durable.counts(user).await
                }
                async fn stats(&self) -> Result<StoreStats> {
                    let $s = self;
                    $(($before)(stringify!(stats));)?
                    $durable.stats().await
                }
                async fn health(&self) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(health));)?
                    $durable.health().await
                }
            }
            #[async_trait::async_trait]
            impl Jobs for $ty {
                async fn pending_jobs(&self, limit: usize) -> Result<Vec<Job>> {
                    let $s = self;
                    $(($before)(stringify!(pending_jobs));)?
                    $durable.pending_jobs(limit).await
                }
                async fn claim_jobs(
                    &self,
                    worker: WorkerId,
                    now: Millis,
                    lease_ms: i64,
                    limit: usize,
                ) -> Result<Vec<Job>> {
                    let $s = self;
                    $(($before)(stringify!(claim_jobs));)?
                    $durable.claim_jobs(worker, now, lease_ms, limit).await
                }
                async fn prepare_jobs(&self, now: Millis, limit: usize) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(prepare_jobs));)?
                    $durable.prepare_jobs(now, limit).await
                }
                async fn advance(&self, worker: WorkerId, progress: &[JobProgress]) -> Result<Vec<bool>> {
                    let $s = self;
                    $(($before)(stringify!(advance));)?
                    $durable.advance(worker, progress).await
                }
                async fn claim_node(&self, node: u16, instance: u64, stale_ms: i64) -> Result<NodeClaim> {
                    let $s = self;
                    $(($before)(stringify!(claim_node));)?
                    $durable.claim_node(node, instance, stale_ms).await
                }
                async fn beat(&self, node: u16, instance: u64) -> Result<bool> {
                    let $s = self;
                    $(($before)(stringify!(beat));)?
                    $durable.beat(node, instance).await
                }
                async fn release_node(&self, node: u16, instance: u64) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(release_node));)?
                    $durable.release_node(node, instance).await
                }
                async fn clock(&self) -> Result<Option<Millis>> {
                    let $s = self;
                    $(($before)(stringify!(clock));)?
                    $durable.clock().await
                }
                async fn shared_trust(&self, change: TrustChange) -> Result<SharedTrust> {
                    let $s = self;
                    $(($before)(stringify!(shared_trust));)?
                    $durable.shared_trust(change).await
                }
            }
            forward_backend!(@shared $ty, $s => $shared $(, before: $before)?);
            #[async_trait::async_trait]
            impl Hub for $ty {
                async fn publish(&self, signals: &[Signal]) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(publish));)?
                    $shared.publish(signals).await
                }
                async fn subscribe(&self) -> Result<Subscription> {
                    let $s = self;
                    $(($before)(stringify!(subscribe));)?
                    $shared.subscribe().await
                }
                async fn ping(&self) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(ping));)?
                    $shared.ping().await
                }
                async fn forget_all(&self) -> Result<usize> {
                    let $s = self;
                    $(($before)(stringify!(forget_all));)?
                    $shared.forget_all().await
                }
                async fn distrust_shared(&self) -> Result<Distrusted> {
                    let $s = self;
                    $(($before)(stringify!(distrust_shared));)?
                    $shared.distrust_shared().await
                }
            }
        };
    };
    // The shared traits but the hub (`Activity`, `HotAuthors`, `Inboxes`,
    // `Removals`, `FactTokens`, `Snapshots`) to `$shared`, each call first
    // let through by `$gate` if given (a closure over `$s` given the
    // method's name, returning `Result<()>`): how
    // [`Trusted`](crate::trust::Trusted) gates the reads pages trust.
    (@shared $ty:ty, $s:ident => $shared:expr $(, before: $before:expr)? $(, gate: $gate:expr)?) => {
        const _: () = {
            use tideway_core::merge::{Direction, KeyRange};
            use tideway_core::{Key, Millis, UserId};
            use $crate::inbox::{InboxRead, InboxStats};
            use $crate::traits::*;
            #[async_trait::async_trait]
            impl Activity for $ty {
                async fn touch(&self, user: UserId, at: Millis) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(touch));)?
                    $(($gate)(stringify!(touch))?;)?
                    $shared.touch(user, at).await
                }
                async fn last_active(&self, users: &[UserId]) -> Result<Vec<Option<Millis>>> {
                    let $s = self;
                    $(($before)(stringify!(last_active));)?
                    $(($gate)(stringify!(last_active))?;)?
                    $shared.last_active(users).await
                }
                async fn inactive_before(&self, cutoff: Millis) -> Result<Vec<UserId>> {
                    let $s = self;
                    $(($before)(stringify!(inactive_before));)?
                    $(($gate)(stringify!(inactive_before))?;)?
                    $shared.inactive_before(cutoff).await
                }
                async fn export_activity(&self) -> Result<Vec<(UserId, Millis)>> {
                    let $s = self;
                    $(($before)(stringify!(export_activity));)?
                    $(($gate)(stringify!(export_activity))?;)?
                    $shared.export_activity().await
                }
                async fn import_activity(&self, entries: &[(UserId, Millis)]) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(import_activity));)?
                    $(($gate)(stringify!(import_activity))?;)?
                    $shared.import_activity(entries).await
                }
            }
            #[async_trait::async_trait]
            impl HotAuthors for $ty {
                async fn mark_unpushed(&self, author: UserId, key: Key) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(mark_unpushed));)?
                    $(($gate)(stringify!(mark_unpushed))?;)?
                    $shared.mark_unpushed(author, key).await
                }
                async fn unpushed_above(&self, authors: &[UserId], floor: Key) -> Result<Vec<UserId>> {
                    let $s = self;
                    $(($before)(stringify!(unpushed_above));)?
                    $(($gate)(stringify!(unpushed_above))?;)?
                    $shared.unpushed_above(authors, floor).await
                }
                async fn unpushed_keys(&self, authors: &[UserId]) -> Result<Vec<Option<Key>>> {
                    let $s = self;
                    $(($before)(stringify!(unpushed_keys));)?
                    $(($gate)(stringify!(unpushed_keys))?;)?
                    $shared.unpushed_keys(authors).await
                }
                async fn export_unpushed(&self) -> Result<Vec<(UserId, Key)>> {
                    let $s = self;
                    $(($before)(stringify!(export_unpushed));)?
                    $(($gate)(stringify!(export_unpushed))?;)?
                    $shared.export_unpushed().await
                }
                async fn import_unpushed(&self, entries: &[(UserId, Key)]) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(import_unpushed));)?
                    $(($gate)(stringify!(import_unpushed))?;)?
                    $shared.import_unpushed(entries).await
                }
            }
            #[async_trait::async_trait]
            impl Inboxes for $ty {
                async fn deliver(&self, key: Key, users: &[UserId]) -> Result<usize> {
                    let $s = self;
                    $(($before)(stringify!(deliver));)?
                    $(($gate)(stringify!(deliver))?;)?
                    $shared.deliver(key, users).await
                }
                async fn deliver_many(&self, batch: &[(Key, &[UserId])]) -> Result<usize> {
                    let $s = self;
                    $(($before)(stringify!(deliver_many));)?
                    $(($gate)(stringify!(deliver_many))?;)?
                    $shared.deliver_many(batch).await
                }
                async fn read_inbox(
                    &self,
                    user: UserId,
                    range: KeyRange,
                    dir: Direction,
                    limit: usize,
                ) -> Result<Option<InboxRead>> {
                    let $s = self;
                    $(($before)(stringify!(read_inbox));)?
                    $(($gate)(stringify!(read_inbox))?;)?
                    $shared.read_inbox(user, range, dir, limit).await
                }
                async fn begin_rebuild(&self, user: UserId) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(begin_rebuild));)?
                    $(($gate)(stringify!(begin_rebuild))?;)?
                    $shared.begin_rebuild(user).await
                }
                async fn finish_rebuild(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(finish_rebuild));)?
                    $(($gate)(stringify!(finish_rebuild))?;)?
                    $shared.finish_rebuild(user, keys, floor).await
                }
                async fn merge_inbox(&self, user: UserId, keys: &[Key], floor: Key) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(merge_inbox));)?
                    $(($gate)(stringify!(merge_inbox))?;)?
                    $shared.merge_inbox(user, keys, floor).await
                }
                async fn inbox_floor(&self, user: UserId) -> Result<Option<Key>> {
                    let $s = self;
                    $(($before)(stringify!(inbox_floor));)?
                    $(($gate)(stringify!(inbox_floor))?;)?
                    $shared.inbox_floor(user).await
                }
                async fn drop_inbox(&self, user: UserId) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(drop_inbox));)?
                    $(($gate)(stringify!(drop_inbox))?;)?
                    $shared.drop_inbox(user).await
                }
                async fn inbox_stats(&self) -> Result<InboxStats> {
                    let $s = self;
                    $(($before)(stringify!(inbox_stats));)?
                    $(($gate)(stringify!(inbox_stats))?;)?
                    $shared.inbox_stats().await
                }
                async fn export_inboxes(&self) -> Result<Vec<(UserId, Key, Vec<Key>)>> {
                    let $s = self;
                    $(($before)(stringify!(export_inboxes));)?
                    $(($gate)(stringify!(export_inboxes))?;)?
                    $shared.export_inboxes().await
                }
                async fn import_inbox(&self, user: UserId, floor: Key, keys: &[Key]) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(import_inbox));)?
                    $(($gate)(stringify!(import_inbox))?;)?
                    $shared.import_inbox(user, floor, keys).await
                }
            }
            #[async_trait::async_trait]
            impl Removals for $ty {
                async fn note_removals(&self, notes: &[Removal], at: Millis, keep_ms: i64) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(note_removals));)?
                    $(($gate)(stringify!(note_removals))?;)?
                    $shared.note_removals(notes, at, keep_ms).await
                }
                async fn removed_since(&self, user: UserId, authors: &[UserId], since: Millis) -> Result<Removed> {
                    let $s = self;
                    $(($before)(stringify!(removed_since));)?
                    $(($gate)(stringify!(removed_since))?;)?
                    $shared.removed_since(user, authors, since).await
                }
            }
            #[async_trait::async_trait]
            impl FactTokens for $ty {
                async fn fact_tokens(&self, keys: &[FactKey]) -> Result<Vec<Option<u64>>> {
                    let $s = self;
                    $(($before)(stringify!(fact_tokens));)?
                    $(($gate)(stringify!(fact_tokens))?;)?
                    $shared.fact_tokens(keys).await
                }
                async fn mint_fact_tokens(&self, keys: &[FactKey]) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(mint_fact_tokens));)?
                    $(($gate)(stringify!(mint_fact_tokens))?;)?
                    $shared.mint_fact_tokens(keys).await
                }
                async fn begin_fact_change(&self, keys: &[FactKey]) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(begin_fact_change));)?
                    $(($gate)(stringify!(begin_fact_change))?;)?
                    $shared.begin_fact_change(keys).await
                }
                async fn end_fact_change(&self, keys: &[FactKey]) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(end_fact_change));)?
                    $(($gate)(stringify!(end_fact_change))?;)?
                    $shared.end_fact_change(keys).await
                }
            }
            #[async_trait::async_trait]
            impl Snapshots for $ty {
                async fn put_snapshot(&self, id: u64, bytes: &[u8], ttl_ms: u64) -> Result<()> {
                    let $s = self;
                    $(($before)(stringify!(put_snapshot));)?
                    $(($gate)(stringify!(put_snapshot))?;)?
                    $shared.put_snapshot(id, bytes, ttl_ms).await
                }
                async fn snapshot(&self, id: u64) -> Result<Option<Vec<u8>>> {
                    let $s = self;
                    $(($before)(stringify!(snapshot));)?
                    $(($gate)(stringify!(snapshot))?;)?
                    $shared.snapshot(id).await
                }
            }
        };
    };
}

pub(crate) use forward_backend;
