//! Reading the index's units from the keyspaces: what start-up reads, each
//! unit a page or a write asks for, and ranges of a user's followers.

use crate::io;
use crate::journal::FjallJournal;
use crate::layout::{counters_of, decode_record, edge_key, head_of, key_of, millis_u64, note_prefix, prefixed, u64_at};
use fjall::Keyspace;
use std::collections::HashMap;
use std::sync::Arc;
use tideway_core::merge::{Direction, KeyRange};
use tideway_core::{Item, ItemId, Key, Millis, UserId};
use tideway_store::job_window::{JOB_WINDOW, JobWindow};
use tideway_store::{Counters, Disk, EdgeKind, Job, OUTBOX_TAIL, Record, State, StoreError, Unit, UnitData};

/// A stored fan-out job.
fn job_of(v: &[u8]) -> Result<Job, StoreError> {
    serde_json::from_slice(v).map_err(|e| StoreError::corrupt_by("job", e))
}

fn i64_at(b: &[u8], at: usize) -> Result<i64, StoreError> {
    u64_at(b, at).map(|v| v as i64)
}

impl FjallJournal {
    /// What a lazy index starts from: the counters, the pending jobs and
    /// the promotions (none of them grows with the items or the graph).
    pub(crate) fn load(&self) -> Result<State, StoreError> {
        let counters = match self.meta.get("counters").map_err(io)? {
            Some(v) => counters_of(&v)?,
            None => Counters::default(),
        };
        // A window of the pending jobs; the rest are only counted.
        let (mut held, mut spilled) = (Vec::new(), 0u64);
        for g in self.jobs.iter() {
            if held.len() == JOB_WINDOW {
                g.key().map_err(io)?;
                spilled += 1;
                continue;
            }
            let (_, v) = g.into_inner().map_err(io)?;
            held.push(job_of(&v)?);
        }
        let jobs = JobWindow::bounded(JOB_WINDOW, held, spilled);
        let mut promotions = Vec::new();
        for g in self.promotions.iter() {
            let (_, v) = g.into_inner().map_err(io)?;
            promotions.push(serde_json::from_slice(&v).map_err(|e| StoreError::corrupt_by("promotion", e))?);
        }
        Ok(State::lazy(counters, jobs, promotions))
    }

    /// Decodes every key under `prefix` of a keyspace (without holding
    /// them: a unit can be a million keys).
    fn decode_under<T>(
        ks: &Keyspace,
        prefix: &[u8],
        decode: impl Fn(&[u8]) -> Result<T, StoreError>,
    ) -> Result<Vec<T>, StoreError> {
        ks.prefix(prefix).map(|g| decode(&g.key().map_err(io)?)).collect()
    }

    /// Reads one unit of the index.
    pub(crate) fn load_unit(&self, unit: Unit) -> Result<UnitData, StoreError> {
        Ok(match unit {
            Unit::Head(u) => {
                UnitData::Head(self.users.get(u.0.to_be_bytes()).map_err(io)?.map(|v| head_of(&v)).transpose()?)
            }
            Unit::Out(u) => {
                let mut following = Vec::new();
                for g in self.edges.prefix(prefixed(b'f', u.0)) {
                    let (k, v) = g.into_inner().map_err(io)?;
                    following.push((UserId(u64_at(&k, 9)?), Millis(i64::try_from(u64_at(&v, 0)?).unwrap_or(0))));
                }
                let tos = |tag: u8| Self::decode_under(&self.edges, &prefixed(tag, u.0), |k| Ok(UserId(u64_at(k, 9)?)));
                UnitData::Out { following, blocking: tos(b'b')?, muting: tos(b'm')? }
            }
            Unit::Followers(u) => UnitData::Followers(Self::decode_under(&self.edges_in, &prefixed(b'f', u.0), |k| {
                Ok((Millis(i64::try_from(u64_at(k, 9)?).unwrap_or(0)), UserId(u64_at(k, 17)?)))
            })?),
            Unit::BlockedBy(u) => UnitData::BlockedBy(Self::decode_under(&self.edges_in, &prefixed(b'b', u.0), |k| {
                Ok(UserId(u64_at(k, 9)?))
            })?),
            // The newest keys, read newest first; one more than the tail
            // tells whether there are older ones.
            Unit::Outbox(u) => {
                let mut keys = Vec::with_capacity(OUTBOX_TAIL + 1);
                for g in self.outbox.prefix(u.0.to_be_bytes()).rev().take(OUTBOX_TAIL + 1) {
                    keys.push(u64_at(&g.key().map_err(io)?, 8)?);
                }
                let from = if keys.len() > OUTBOX_TAIL {
                    keys.pop();
                    keys.last().copied().unwrap_or(0)
                } else {
                    0
                };
                keys.reverse();
                UnitData::Outbox { keys, from }
            }
            Unit::OutboxAll(u) => UnitData::Outbox {
                keys: Self::decode_under(&self.outbox, &u.0.to_be_bytes(), |k| u64_at(k, 8))?,
                from: 0,
            },
            Unit::Inserts(u) => {
                let mut list = Vec::new();
                for g in self.user_inserts.prefix(u.0.to_be_bytes()) {
                    let (k, v) = g.into_inner().map_err(io)?;
                    list.push((u64_at(&k, 8)?, ItemId(u64_at(&v, 0)?)));
                }
                UnitData::Inserts(list)
            }
            Unit::Item(i) => {
                let prefix = i.0.to_be_bytes();
                let reposts = Self::decode_under(&self.reposts, &prefix, |k| {
                    Ok((UserId(u64_at(k, 8)?), ItemId(u64_at(k, 16)?)))
                })?;
                let replies = self.replies.prefix(prefix).count() as u64;
                let reactions = Self::decode_under(&self.reactions, &prefix, |k| {
                    let kind = match k.get(16..) {
                        Some(rest) if !rest.is_empty() => {
                            std::str::from_utf8(rest).map_err(|_| StoreError::corrupt("reaction kind is not UTF-8"))?
                        }
                        _ => return Err(StoreError::corrupt(format!("reaction key of {} bytes has no kind", k.len()))),
                    };
                    Ok((UserId(u64_at(k, 8)?), kind.to_owned()))
                })?;
                UnitData::Item { reposts, replies, reactions }
            }
            Unit::Notify(u) => {
                let marks = match self.notify.get(note_prefix(b'm', u)).map_err(io)? {
                    Some(v) => Some((Millis(i64_at(&v, 0)?), Millis(i64_at(&v, 8)?))),
                    None => None,
                };
                let corrupt = |what| move |e| StoreError::corrupt_by(what, e);
                let mut groups = Vec::new();
                for g in self.notify.prefix(note_prefix(b'g', u)) {
                    let (k, v) = g.into_inner().map_err(io)?;
                    groups.push((u64_at(&k, 9)?, serde_json::from_slice(&v).map_err(corrupt("notification group"))?));
                }
                let mut events = Vec::new();
                for g in self.notify.prefix(note_prefix(b'e', u)) {
                    let (k, v) = g.into_inner().map_err(io)?;
                    let verb = serde_json::from_slice(k.get(17..).unwrap_or_default())
                        .map_err(corrupt("notification verb"))?;
                    let event = serde_json::from_slice(&v).map_err(corrupt("notification event"))?;
                    events.push((verb, UserId(u64_at(&k, 9)?), event));
                }
                UnitData::Notify { marks, groups, events }
            }
            Unit::Live(anchor) => {
                let mut ids = Vec::new();
                for g in self.live.prefix(prefixed(b'a', anchor.0)) {
                    ids.push(u64_at(&g.key().map_err(io)?, 9)?);
                }
                UnitData::Live(self.read_sessions(&ids)?.into_iter().flatten().collect())
            }
        })
    }
}

/// What the lazy index reads back: units, follower ranges, and the point
/// reads behind pages' cache misses and writes' checks.
impl Disk for FjallJournal {
    /// A user never named has no units: one point read of their counters
    /// answers all their units at once (a follow by a new user asks for
    /// three).
    fn load_units(&self, units: &[Unit]) -> Result<Vec<UnitData>, StoreError> {
        let mut unknown: HashMap<UserId, bool> = HashMap::new();
        units
            .iter()
            .map(|unit| {
                let user = match *unit {
                    // A user never named may have notifications (a mention).
                    Unit::Item(_) | Unit::Notify(_) | Unit::Live(_) => None,
                    // One read tells the counters and whether the user is
                    // known (units sort with the heads first).
                    Unit::Head(u) => {
                        let head = self.users.get(u.0.to_be_bytes()).map_err(io)?;
                        unknown.insert(u, head.is_none());
                        return Ok(UnitData::Head(head.map(|v| head_of(&v)).transpose()?));
                    }
                    Unit::Out(u)
                    | Unit::Followers(u)
                    | Unit::BlockedBy(u)
                    | Unit::Outbox(u)
                    | Unit::OutboxAll(u)
                    | Unit::Inserts(u) => Some(u),
                };
                if let Some(u) = user {
                    let absent = match unknown.get(&u) {
                        Some(a) => *a,
                        None => {
                            let a = !self.users.contains_key(u.0.to_be_bytes()).map_err(io)?;
                            unknown.insert(u, a);
                            a
                        }
                    };
                    if absent {
                        return Ok(UnitData::empty(*unit));
                    }
                }
                self.load_unit(*unit)
            })
            .collect()
    }

    fn followers_range(
        &self,
        user: UserId,
        from: Option<tideway_store::FollowerPos>,
        ascending: bool,
        limit: usize,
    ) -> Result<Vec<tideway_store::FollowerPos>, StoreError> {
        let prefix = prefixed(b'f', user.0);
        let key = |(since, id): tideway_store::FollowerPos| {
            let mut k = prefix.clone();
            k.extend_from_slice(&key_of(&[millis_u64(since), id.0]));
            k
        };
        let decode = |k: &[u8]| -> Result<tideway_store::FollowerPos, StoreError> {
            Ok((Millis(i64::try_from(u64_at(k, 9)?).unwrap_or(0)), UserId(u64_at(k, 17)?)))
        };
        let mut end = prefix.clone();
        end.extend_from_slice(&[0xff; 16]);
        let iter = match (from, ascending) {
            (Some(p), true) => self.edges_in.range((std::ops::Bound::Excluded(key(p)), std::ops::Bound::Included(end))),
            (None, true) => self.edges_in.prefix(&prefix),
            (Some(p), false) => {
                self.edges_in.range((std::ops::Bound::Included(prefix.clone()), std::ops::Bound::Excluded(key(p))))
            }
            (None, false) => self.edges_in.prefix(&prefix),
        };
        let keys: Box<dyn Iterator<Item = fjall::Guard>> =
            if ascending { Box::new(iter) } else { Box::new(iter.rev()) };
        keys.take(limit).map(|g| decode(&g.key().map_err(io)?)).collect()
    }

    /// Point reads of the records (fjall's block cache and the OS page
    /// cache serve the warm ones): an item, else an insertion.
    fn read_records(&self, keys: &[Key]) -> Result<Vec<Option<Record>>, StoreError> {
        keys.iter()
            .map(|key| {
                if let Some(v) = self.items.get(key.to_be_bytes()).map_err(io)? {
                    return Ok(Some(Record::Item(decode_record(ItemId(*key), &v)?)));
                }
                let Some(v) = self.inserts.get(key.to_be_bytes()).map_err(io)? else { return Ok(None) };
                let (user, item) = (UserId(u64_at(&v, 0)?), ItemId(u64_at(&v, 8)?));
                Ok(Some(Record::Insert { key: *key, user, item }))
            })
            .collect()
    }

    fn read_bodies(&self, ids: &[ItemId]) -> Result<Vec<Option<tideway_core::Body>>, StoreError> {
        ids.iter()
            .map(|id| {
                let Some(v) = self.bodies.get(id.0.to_be_bytes()).map_err(io)? else { return Ok(None) };
                let body = tideway_core::Body::from_json(&v)
                    .map_err(|e| StoreError::corrupt_by(format!("body of {id}"), e))?;
                Ok(Some(body))
            })
            .collect()
    }

    fn has_item(&self, id: ItemId) -> Result<bool, StoreError> {
        self.items.contains_key(id.0.to_be_bytes()).map_err(io)
    }

    fn idempotent(&self, author: UserId, key: &str) -> Result<Option<ItemId>, StoreError> {
        let mut k = key_of(&[author.0]);
        k.extend_from_slice(key.as_bytes());
        match self.idempotency.get(k).map_err(io)? {
            Some(v) => Ok(Some(ItemId(u64_at(&v, 0)?))),
            None => Ok(None),
        }
    }

    /// One range read of `postings` under the feed's prefix.
    fn postings_range(&self, feed: u64, range: KeyRange, dir: Direction, limit: usize) -> Result<Vec<Key>, StoreError> {
        use std::ops::Bound::{Excluded, Included};
        if limit == 0 || range.is_empty() {
            return Ok(Vec::new());
        }
        let low = match range.above {
            Some(a) => Excluded(key_of(&[feed, a])),
            None => Included(key_of(&[feed, 0])),
        };
        let high = match range.below {
            Some(b) => Excluded(key_of(&[feed, b])),
            None => Included(key_of(&[feed, u64::MAX])),
        };
        let iter = self.postings.range((low, high));
        let keys: Box<dyn Iterator<Item = fjall::Guard>> = match dir {
            Direction::Newer => Box::new(iter),
            Direction::Older => Box::new(iter.rev()),
        };
        keys.take(limit).map(|g| u64_at(&g.key().map_err(io)?, 8)).collect()
    }

    fn items_after(&self, after: Option<ItemId>, limit: usize) -> Result<Vec<Arc<Item>>, StoreError> {
        use std::ops::Bound::{Excluded, Unbounded};
        let low = after.map_or(Unbounded, |a| Excluded(a.0.to_be_bytes().to_vec()));
        let range = self.items.range::<Vec<u8>, _>((low, Unbounded));
        range
            .take(limit)
            .map(|g| {
                let (k, v) = g.into_inner().map_err(io)?;
                decode_record(ItemId(u64_at(&k, 0)?), &v)
            })
            .collect()
    }

    /// Follows are `f` + follower + followee in `edges`.
    fn follows_after(
        &self,
        after: Option<(UserId, UserId)>,
        limit: usize,
    ) -> Result<Vec<(UserId, UserId, Millis)>, StoreError> {
        use std::ops::Bound::{Excluded, Included};
        let low = match after {
            Some((from, to)) => Excluded(edge_key(EdgeKind::Follow, from, to)),
            None => Included(vec![b'f']),
        };
        let range = self.edges.range::<Vec<u8>, _>((low, Excluded(vec![b'f' + 1])));
        range
            .take(limit)
            .map(|g| {
                let (k, v) = g.into_inner().map_err(io)?;
                let since = Millis(i64::try_from(u64_at(&v, 0)?).unwrap_or(0));
                Ok((UserId(u64_at(&k, 1)?), UserId(u64_at(&k, 9)?), since))
            })
            .collect()
    }

    fn reactions_after(
        &self,
        after: Option<(ItemId, UserId, String)>,
        limit: usize,
    ) -> Result<Vec<(ItemId, UserId, String)>, StoreError> {
        use std::ops::Bound::{Excluded, Unbounded};
        let low = after.map_or(Unbounded, |(item, user, kind)| {
            let mut k = key_of(&[item.0, user.0]);
            k.extend_from_slice(kind.as_bytes());
            Excluded(k)
        });
        let range = self.reactions.range::<Vec<u8>, _>((low, Unbounded));
        range
            .take(limit)
            .map(|g| {
                let k = g.key().map_err(io)?;
                let kind = String::from_utf8(k.get(16..).unwrap_or_default().to_vec())
                    .map_err(|e| StoreError::corrupt_by("a reaction's kind", e))?;
                Ok((ItemId(u64_at(&k, 0)?), UserId(u64_at(&k, 8)?), kind))
            })
            .collect()
    }

    fn pending_jobs(&self, held: &[Key], limit: usize) -> Result<Vec<Job>, StoreError> {
        let mut jobs = Vec::new();
        for g in self.jobs.iter() {
            if jobs.len() == limit {
                break;
            }
            let (k, v) = g.into_inner().map_err(io)?;
            if held.binary_search(&u64_at(&k, 0)?).is_ok() {
                continue;
            }
            jobs.push(job_of(&v)?);
        }
        Ok(jobs)
    }

    fn item_units_floor(&self) -> Result<u64, StoreError> {
        // Each of these keyspaces is keyed by the item first: its last key
        // names the highest item with any.
        let mut floor = 0;
        for space in [&self.reposts, &self.replies, &self.reactions] {
            if let Some(last) = space.last_key_value() {
                floor = floor.max(u64_at(&last.key().map_err(io)?, 0)?);
            }
        }
        Ok(floor)
    }

    /// The filters and block indexes fjall keeps loaded for its tables
    /// outside the block cache. Keyspaces created with nothing pinned
    /// (`FjallJournal::open`, since 2026-12-05) keep only large tables'
    /// top-level indexes; older ones keep fjall's default pins too (3.1
    /// bytes per item after 6.6M posts, docs/benchmarks.md).
    fn pinned_bytes(&self) -> u64 {
        use fjall::AbstractTree;
        self.keyspaces().iter().map(|k| (k.tree.pinned_filter_size() + k.tree.pinned_block_index_size()) as u64).sum()
    }

    /// The memtables of every keyspace, active and sealed (each rotated at
    /// a quarter of the block cache, see `journal::memtable_cap`).
    fn buffered_bytes(&self) -> u64 {
        self.db.write_buffer_size()
    }

    fn read_sessions(&self, ids: &[u64]) -> Result<Vec<Option<tideway_core::live::Session>>, StoreError> {
        ids.iter()
            .map(|id| match self.live.get(prefixed(b's', *id)).map_err(io)? {
                Some(v) => serde_json::from_slice(&v).map(Some).map_err(|e| StoreError::corrupt_by("live session", e)),
                None => Ok(None),
            })
            .collect()
    }
}
