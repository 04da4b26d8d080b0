//! The real-time home stream (API.md, "The home stream"): what a stream
//! sends, read from the home feed itself, so that what a client received,
//! minus what it was told left, is the top of its home as a page shows it.
//!
//! - **Entries are read, never logged**: a stream's position is a home
//!   cursor; each step reads the entries above it up to the top, pulled
//!   from the outboxes of whom the user follows (the definition itself: no
//!   fan-out lag, hot authors' items alike), and sends them oldest first,
//!   each once `settle_ms` has passed since its time (a write that took an
//!   older id may still be landing). Each is the entry exactly as the first
//!   page of the home shows it (`FeedsService::home_above`): its cursor,
//!   the event's id, carries its rank from the top. A step that finds
//!   nothing costs one page read.
//! - **Deletes while connected**: a stream holds the last [`HELD`] entries
//!   the client holds (those it sent, and at the start the page below its
//!   position) and, at a check, reads the home above the oldest of them
//!   again: one no longer there is a `delete`; one that moved (its earliest
//!   appearance went) is a `delete`, then an `entry` where it is now.
//! - **Every id marks a place**: an entry's id is its cursor; a delete's is
//!   a [`StreamMark`]: the position, the time before which every removal
//!   (`Removals`, noted after its write) was told (the last check's read,
//!   less `settle_ms` for clocks and notes' writes), and the deletes sent
//!   since shortly before it, whose removals may be noted after it.
//! - **Resuming**: an id of this user's stream within
//!   `stream.replay_window` resumes after it: first the `delete`s of what
//!   left the home since the id's time (an entry's: its own; a delete's:
//!   its mark's) — the shared half's `Removals` (a followee's item deleted
//!   or hidden, someone the user's graph lost), judged against the home
//!   now as a connected stream judges what it holds, less those the mark
//!   names as sent; then the entries after the position. Any other id is a
//!   `reset` (the client reloads the first page and reads on from the top).

use super::ServiceOptions;
use super::feeds::FeedsService;
use super::node::Node;
use crate::error::Result;
use crate::view::{EntryView, PageRequest, Reason};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use tideway_core::cursor::{Cursor, FeedScope, StreamMark};
use tideway_core::ids::{key_floor_of, key_time};
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{ItemId, Millis, UserId};
use tideway_store::Backend;
use tideway_store::Record;

/// Entries a stream keeps to tell when they leave (a page's worth).
pub const HELD: usize = 100;

/// How often an open stream with no wake-up reads its home, checking what
/// it sent too: a lost signal delays an event at most this long. (HTTP
/// sends its keep-alive comment at the same interval.)
pub const HEARTBEAT: std::time::Duration = std::time::Duration::from_secs(15);

/// One event of a home stream.
#[derive(Debug, Clone, PartialEq)]
pub enum StreamEvent {
    /// An entry at the top of the home; `id` is its cursor.
    Entry(EntryView),
    /// An entry left the home; `id` marks the stream's place (a
    /// [`StreamMark`]: its position, and which removals it has told).
    Delete { id: String, item: ItemId },
    /// The server cannot replay from the id given; `id` is the top now.
    Reset { id: String, reason: String },
}

/// Where one home stream is, and what it sent that may still leave.
#[derive(Debug, Clone)]
pub struct HomeStream {
    pub user: UserId,
    /// The cursor of the newest entry sent (or where the stream started).
    position: String,
    position_key: u64,
    /// The entries sent, oldest first: (item, cursor, key), at most
    /// [`HELD`]; and the cursor just below the oldest of them.
    held: VecDeque<(ItemId, String, u64)>,
    floor: String,
    /// Removals noted at or after this time (ms) may not have been told to
    /// the client yet; those before were, for every entry it holds.
    since: i64,
    /// The deletes sent lately (item, when): a removal noted at or after
    /// `since` whose delete was already sent is one of them.
    recent: VecDeque<(ItemId, i64)>,
    /// When the last step saw an entry too new to send yet: read again
    /// after this long, signal or not.
    pub wake_in: Option<std::time::Duration>,
}

impl HomeStream {
    /// The id of the stream's position (a client resumes from it).
    pub fn position(&self) -> &str {
        &self.position
    }
}

/// The home stream: opening (resume or reset) and its steps. Holds the
/// backend, the node, the feeds (what it sends is the home as a page shows
/// it) and this node's open streams.
pub struct StreamService {
    backend: Arc<dyn Backend>,
    node: Arc<Node>,
    feeds: Arc<FeedsService>,
    /// This node's open home streams, woken by the hub (listening from the
    /// first stream on).
    wakes: Arc<crate::wakes::Wakes>,
    wakes_listening: std::sync::atomic::AtomicBool,
    /// How long a stream waits before it sends an entry
    /// ([`ServiceOptions::settle_ms`]).
    settle_ms: i64,
    /// How old an event id a stream resumes from (`stream.replay_window`).
    replay_window_ms: i64,
}

/// An open home stream: the events it missed first, then those its home
/// gives as they come. It owns the waiting (a wake-up from the hub, the
/// settle time of an entry not yet due, or the heartbeat), the
/// re-registration when whom the user follows changed, and the steps; its
/// edge only writes each event out.
pub struct EventStream {
    svc: Arc<StreamService>,
    home: HomeStream,
    reg: crate::wakes::Registration,
    pending: VecDeque<StreamEvent>,
}

impl EventStream {
    /// The next event, waited for as long as it takes; `None` when the
    /// home can no longer be read (the stream ends, and the client resumes
    /// from the last id it received).
    pub async fn next(&mut self) -> Option<StreamEvent> {
        use std::sync::atomic::Ordering::AcqRel;
        loop {
            if let Some(e) = self.pending.pop_front() {
                return Some(e);
            }
            let wait = self.home.wake_in.map_or(HEARTBEAT, |w| w.min(HEARTBEAT));
            // A heartbeat with no wake checks everything (a lost signal).
            let woken = tokio::time::timeout(wait, self.reg.waker.notify.notified()).await.is_ok();
            let check_sent = self.reg.waker.check_sent.swap(false, AcqRel) || (!woken && wait == HEARTBEAT);
            if self.reg.waker.graph_changed.swap(false, AcqRel) {
                match self.svc.register_stream(self.home.user).await {
                    Ok(r) => self.reg = r,
                    Err(e) => {
                        tracing::debug!(error = %e, "home stream: whom the user follows could not be read");
                        return None;
                    }
                }
            }
            match self.svc.stream_step(&mut self.home, check_sent).await {
                Ok(events) => self.pending.extend(events),
                Err(e) => {
                    tracing::debug!(error = %e, "home stream: the home could not be read; ending the stream");
                    return None;
                }
            }
        }
    }
}

impl StreamService {
    /// Opens `user`'s stream after `last_event_id` (or at the top of the
    /// home now), registered with this node's wake-ups.
    pub async fn open(self: &Arc<Self>, user: UserId, last_event_id: Option<&str>) -> Result<EventStream> {
        let (home, first) = self.open_stream(user, last_event_id).await?;
        let reg = self.register_stream(user).await?;
        Ok(EventStream { svc: self.clone(), home, reg, pending: first.into() })
    }

    pub(crate) fn new(
        backend: Arc<dyn Backend>,
        node: Arc<Node>,
        feeds: Arc<FeedsService>,
        opts: &ServiceOptions,
    ) -> Self {
        Self {
            backend,
            node,
            feeds,
            wakes: Arc::default(),
            wakes_listening: std::sync::atomic::AtomicBool::new(false),
            settle_ms: opts.settle_ms,
            replay_window_ms: opts.replay_window_ms,
        }
    }

    /// Indexes a stream of `user` among this node's, by whom they follow:
    /// the signals that concern it wake it (the node starts listening to
    /// the hub with its first stream).
    pub(crate) async fn register_stream(&self, user: UserId) -> Result<crate::wakes::Registration> {
        if !self.wakes_listening.swap(true, std::sync::atomic::Ordering::AcqRel) {
            self.wakes.spawn_listener(self.backend.clone());
        }
        let authors = self.backend.followees(user).await?;
        Ok(self.wakes.register(user, authors))
    }

    /// Home streams open on this node.
    pub fn streams_open(&self) -> usize {
        self.wakes.open()
    }

    fn home_key(user: UserId, cursor: &str) -> Option<u64> {
        Cursor::decode(cursor, &FeedScope::Home(user.0)).ok().map(|c| c.key)
    }

    /// Where an id resumes: the position (a home cursor) and its key, the
    /// time from which removals may be untold, and the deletes sent lately
    /// (an entry's id: its cursor, removals from its time; a delete's: its
    /// [`StreamMark`]). `None`: not an id of this user's stream.
    fn resume_point(user: UserId, id: &str) -> Option<(String, u64, i64, Vec<ItemId>)> {
        if let Some(key) = Self::home_key(user, id) {
            return Some((id.to_owned(), key, key_time(key).0, Vec::new()));
        }
        let m = StreamMark::decode(id, user.0).ok()?;
        let position = Cursor { key: m.key, aux: m.aux }.encode(&FeedScope::Home(user.0));
        let since = i64::try_from(m.since).ok()?;
        Some((position, m.key, since, m.items.into_iter().map(ItemId).collect()))
    }

    /// The id of a `delete` event sent now: the stream's position, the
    /// removals told before `since`, and the deletes sent lately.
    fn delete_id(s: &HomeStream, since: i64) -> String {
        let aux = Cursor::decode(&s.position, &FeedScope::Home(s.user.0)).map_or(0, |c| c.aux);
        let skip = s.recent.len().saturating_sub(StreamMark::MAX_ITEMS);
        let items = s.recent.iter().skip(skip).map(|(i, _)| i.0).collect();
        StreamMark { key: s.position_key, aux, since: u64::try_from(since).unwrap_or(0), items }.encode(s.user.0)
    }

    /// Notes a delete sent now, and forgets those sent too long before
    /// `since` for their removals to be noted at or after it (a node's clock
    /// and a note's write are within `settle_ms`).
    fn sent_delete(&self, s: &mut HomeStream, item: ItemId) {
        s.recent.push_back((item, self.node.now().0));
        self.forget_recent(s);
    }

    fn forget_recent(&self, s: &mut HomeStream) {
        let keep_from = s.since.saturating_sub(self.settle_ms);
        while s.recent.front().is_some_and(|(_, at)| *at < keep_from) || s.recent.len() > StreamMark::MAX_ITEMS {
            s.recent.pop_front();
        }
    }

    /// Holds `entries` (newest first, as a page gives them) as the entries
    /// the client holds, a page's worth at most.
    fn hold(s: &mut HomeStream, entries: &[EntryView]) {
        let organic: Vec<(ItemId, String, u64)> = entries
            .iter()
            .filter(|e| e.reason != Reason::Promoted)
            .map(|e| (e.item.item.id, e.cursor.clone(), e.key))
            .take(HELD)
            .collect();
        s.held = organic.into_iter().rev().collect();
        if let Some((_, _, oldest)) = s.held.front() {
            s.floor = Cursor::new(oldest.saturating_sub(1)).encode(&FeedScope::Home(s.user.0));
        }
    }

    /// Opens `user`'s stream after `last_event_id` (the first events are
    /// what the client missed), or at the top of the home now (a `reset`
    /// first when the id cannot be resumed). Either way the stream holds
    /// the page's worth of entries the client holds below its position, to
    /// tell when they leave.
    pub(crate) async fn open_stream(
        &self,
        user: UserId,
        last_event_id: Option<&str>,
    ) -> Result<(HomeStream, Vec<StreamEvent>)> {
        let now = self.node.now();
        let window = self.replay_window_ms;
        let reset = match last_event_id {
            None => None,
            Some(id) => match Self::resume_point(user, id) {
                None => Some("the id is not one of this home's events"),
                Some((_, key, since, _)) if now.0.saturating_sub(key_time(key).0.max(since)) > window => {
                    Some("the id is older than the replay window")
                }
                Some((position, key, since, told)) => {
                    let mut s = HomeStream {
                        user,
                        position: position.clone(),
                        position_key: key,
                        held: VecDeque::new(),
                        floor: position,
                        since,
                        recent: told.into_iter().map(|i| (i, now.0)).collect(),
                        wake_in: None,
                    };
                    // What the client missed comes first: the entries that
                    // left, then those that arrived.
                    let mut missed = self.resume_deletes(&mut s).await?;
                    missed.extend(self.stream_step(&mut s, false).await?);
                    return Ok((s, missed));
                }
            },
        };
        // At the top now: the newest entry's cursor, or (an empty home) a
        // position just before this moment.
        let read_at = self.node.now().0;
        let top = self.feeds.home_pulled(user, &PageRequest { limit: Some(HELD), ..PageRequest::default() }).await?;
        let (position_key, position) = match top.entries.iter().find(|e| e.reason != Reason::Promoted) {
            Some(e) => (e.key, e.cursor.clone()),
            None => {
                let key = key_floor_of(now).saturating_sub(1);
                (key, Cursor::new(key).encode(&FeedScope::Home(user.0)))
            }
        };
        let mut s = HomeStream {
            user,
            position: position.clone(),
            position_key,
            held: VecDeque::new(),
            floor: position.clone(),
            since: read_at.saturating_sub(self.settle_ms),
            recent: VecDeque::new(),
            wake_in: None,
        };
        Self::hold(&mut s, &top.entries);
        let events = match reset {
            Some(reason) => vec![StreamEvent::Reset { id: position, reason: reason.to_owned() }],
            None => Vec::new(),
        };
        Ok((s, events))
    }

    /// The `delete` events a client resuming at `s`'s position missed: the
    /// entries that may have left since `s.since` (`Removals`: items deleted
    /// or hidden by followees, others the user's graph lost, whose items and
    /// reposts are read from their outboxes), judged against the home now
    /// at and below the position, a page's worth ([`HELD`]), as a connected
    /// stream judges the entries it sent; but for those whose deletes the
    /// client was sent already (`s.recent`). An entry goes when its item is
    /// no longer there, or is there only at a later appearance than the one
    /// that went. A delete may name an item the client never held (it
    /// removes nothing). The page read becomes what the stream holds, and
    /// every removal noted before it (less `settle_ms`) is told.
    async fn resume_deletes(&self, s: &mut HomeStream) -> Result<Vec<StreamEvent>> {
        let read_at = self.node.now().0;
        let followees = self.backend.followees(s.user).await?;
        let removed = self.backend.removed_since(s.user, &followees, Millis(s.since)).await?;
        let scope = FeedScope::Home(s.user.0);
        let at_or_below = Cursor::new(s.position_key.saturating_add(1)).encode(&scope);
        let req = PageRequest { limit: Some(HELD), before: Some(at_or_below), ..PageRequest::default() };
        let page = self.feeds.home_pulled(s.user, &req).await?;
        Self::hold(s, &page.entries);
        let id_since = s.since;
        s.since = s.since.max(read_at.saturating_sub(self.settle_ms));
        if removed.is_empty() {
            self.forget_recent(s);
            return Ok(Vec::new());
        }
        let here: HashMap<ItemId, u64> = s.held.iter().map(|(item, _, key)| (*item, *key)).collect();
        // A full page stops somewhere: below it nothing is judged.
        let bottom = if here.len() >= HELD { here.values().copied().min().unwrap_or(0) } else { 0 };
        let mut candidates = removed.items;
        if !removed.others.is_empty() {
            let range =
                KeyRange { above: Some(bottom.saturating_sub(1)), below: Some(s.position_key.saturating_add(1)) };
            let keys = self.backend.outbox_merge(&removed.others, range, Direction::Older, HELD).await?;
            for (key, record) in keys.iter().zip(self.backend.records(&keys).await?) {
                if let Some(Record::Item(it)) = record {
                    candidates.push((it.repost_of.unwrap_or(it.id), Some(*key)));
                }
            }
        }
        let told: HashSet<ItemId> = s.recent.iter().map(|(i, _)| *i).collect();
        let mut sent = HashSet::new();
        let mut out = Vec::new();
        for (item, went) in candidates {
            let judged = went.unwrap_or(item.0);
            if judged < bottom || judged > s.position_key || told.contains(&item) {
                continue;
            }
            let gone = match (here.get(&item), went) {
                (None, _) => true,
                (Some(now), Some(went)) => *now > went,
                (Some(_), None) => false,
            };
            if gone && sent.insert(item) {
                self.sent_delete(s, item);
                out.push(StreamEvent::Delete { id: Self::delete_id(s, id_since), item });
            }
        }
        self.forget_recent(s);
        Ok(out)
    }

    /// What changed at the top of the stream's home since its last step;
    /// with `check_sent`, whether what it sent is still there too (after a
    /// delete, a patch, a change of the graph, or at a heartbeat).
    pub(crate) async fn stream_step(&self, s: &mut HomeStream, check_sent: bool) -> Result<Vec<StreamEvent>> {
        let mut out = Vec::new();
        // Entries that left or moved, among those held. A delete's id tells
        // the removals before the last check (this one's are being told).
        if check_sent {
            let read_at = self.node.now().0;
            let told_before = s.since;
            let mut judged_all = true;
            if !s.held.is_empty() {
                let req = PageRequest { limit: Some(HELD), after: Some(s.floor.clone()), ..PageRequest::default() };
                let page = self.feeds.home_pulled(s.user, &req).await?;
                let now: Vec<(ItemId, u64)> = page
                    .entries
                    .iter()
                    .filter(|e| e.reason != Reason::Promoted)
                    .map(|e| (e.item.item.id, e.key))
                    .collect();
                // A full page may stop below the newest held entries: judge
                // only those it covers.
                let covered = if now.len() >= HELD { now.iter().map(|e| e.1).max().unwrap_or(0) } else { u64::MAX };
                let mut kept = VecDeque::with_capacity(s.held.len());
                for (item, cursor, key) in std::mem::take(&mut s.held) {
                    let here = now.iter().find(|(i, _)| *i == item);
                    match here {
                        Some((_, k)) if *k == key => kept.push_back((item, cursor, key)),
                        _ if key > covered => {
                            judged_all = false;
                            kept.push_back((item, cursor, key));
                        }
                        // Moved below the position: only its delete is ours
                        // to send (entries below the top are not streamed).
                        _ => {
                            self.sent_delete(s, item);
                            out.push(StreamEvent::Delete { id: Self::delete_id(s, told_before), item });
                        }
                    }
                }
                s.held = kept;
            }
            // Every removal noted before this read (less the margin for
            // clocks and notes' writes) is told now, for every entry held.
            if judged_all {
                s.since = s.since.max(read_at.saturating_sub(self.settle_ms));
                self.forget_recent(s);
            }
        }
        // New entries at the top, oldest first, once settled (a write that
        // took an older id may still be landing: sending a newer entry first
        // would pass it over), each as the first page of the home shows it.
        s.wake_in = None;
        let settled_before = self.node.now().0.saturating_sub(self.settle_ms);
        let fresh: Vec<EntryView> = self
            .feeds
            .home_above(s.user, &s.position)
            .await?
            .into_iter()
            .filter(|e| e.reason != Reason::Promoted)
            .collect();
        for e in fresh.into_iter().rev() {
            let key = e.key;
            if key <= s.position_key {
                continue;
            }
            let at = key_time(key).0;
            if at > settled_before {
                let wait = (at - settled_before).clamp(1, self.settle_ms.max(1));
                s.wake_in = Some(std::time::Duration::from_millis(wait as u64));
                break;
            }
            let item = e.item.item.id;
            // An entry that moved up: its old place goes first.
            if let Some(at) = s.held.iter().position(|h| h.0 == item) {
                s.held.remove(at);
                self.sent_delete(s, item);
                out.push(StreamEvent::Delete { id: Self::delete_id(s, s.since), item });
            }
            s.position = e.cursor.clone();
            s.position_key = key;
            s.held.push_back((item, e.cursor.clone(), key));
            while s.held.len() > HELD {
                if let Some((_, cursor, _)) = s.held.pop_front() {
                    s.floor = cursor;
                }
            }
            out.push(StreamEvent::Entry(e));
        }
        Ok(out)
    }
}
