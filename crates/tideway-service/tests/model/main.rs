//! Model-based test: random sequences of every write the API offers, over a
//! few users with a tiny inbox cap, hot-author thresholds crossed both ways
//! and readers going inactive, against the in-memory and the embedded
//! backends (with restarts). After the fan-out queue drains, every page of
//! every home and profile — walked older and newer, at several page sizes —
//! must equal the SPEC's pull definition computed by the plain reference
//! implementation below, which shares no code with the service.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use tideway_config::{BackendKind, SyncKind};
use tideway_core::live::{Move, Phase, Session};
use tideway_core::{ItemId, ItemKind, Millis, NewItem, UserId, Visibility};
use tideway_engines::Opened;
use tideway_service::{FanoutWorker, FeedService, ManualClock, Page, PageRequest, ServiceError, ServiceOptions};
use tideway_store::{Backend, Counted};

mod checks;
mod harness;
mod reference;
use checks::*;
use harness::*;
use reference::*;

async fn run(seed: u64, kind: Kind, ops: usize) {
    let mut rng = StdRng::seed_from_u64(seed);
    // Caps of 2 to 4 entries: pages cross the push/pull seam constantly.
    let max_len = 2 + (seed % 3) as usize;
    // Half the seeds: authors with 2+ followers are hot (pulled, not pushed),
    // so authors cross the threshold both ways all the time. A third: readers
    // go inactive after 30 ms of the test clock and sweeps drop their inboxes.
    let hot_followers = if seed.is_multiple_of(2) { 2 } else { u64::MAX };
    let active_window_ms = if seed.is_multiple_of(3) { 30 } else { i64::MAX };
    let opts = ServiceOptions {
        max_len,
        max_following: 4,
        chunk_size: 2,
        hot_followers,
        active_window_ms,
        // Some seeds run a worker step's chunks side by side (as on shared
        // engines), the others one after the other.
        chunks_in_flight: if seed % 4 < 2 { 1 } else { 4 },
        // Pages read counts ahead on half the seeds (both hot and cold ones).
        read_ahead: matches!(seed % 4, 1 | 2),
        // Nodes keep copies of item records on half the seeds, checked by
        // every page (on the others only the store's own caches serve);
        // a few of those with a cache so small it keeps hardly any.
        copies_bytes: match seed % 6 {
            0 | 2 => 4 << 20,
            4 => 1,
            _ => 0,
        },
        // With copies, nodes mark a reader active once a minute at most
        // where readers never go inactive (a thousandth of the window, as
        // the server derives it: nothing with a 30 ms window).
        touch_every_ms: if seed.is_multiple_of(6) && active_window_ms == i64::MAX { 60_000 } else { 0 },
        // Some seeds reuse an author's hot decision for a minute of the test
        // clock while authors cross the threshold both ways: pages must not
        // care which way an item went.
        hot_decision_ms: if seed % 6 == 2 { 60_000 } else { 0 },
        snapshot_ttl_ms: LIVE_TTL_MS,
        ..ServiceOptions::default()
    };
    let restartable = matches!(kind, Kind::Fjall(..) | Kind::Scaled { .. });
    let mut h = Harness::new(kind, opts).await;
    let mut m = Model { max_following: 4, ..Model::default() };
    for step in 0..ops {
        h.clock.advance(rng.random_range(1..5));
        let a = rng.random_range(1..=USERS);
        let b = rng.random_range(1..=USERS);
        let any_item = |rng: &mut StdRng, m: &Model| -> Option<u64> {
            if m.items.is_empty() {
                return None;
            }
            let ids: Vec<u64> = m.items.keys().copied().collect();
            Some(ids[rng.random_range(0..ids.len())])
        };
        let ctx = format!("seed {seed} step {step}");
        match rng.random_range(0..150) {
            0..=14 => {
                // follow
                if a == b {
                    continue;
                }
                let want = if m.follows(a, b) {
                    Ok(())
                } else if m.blocked(a, b) {
                    Err("forbidden")
                } else if m.follows.iter().filter(|(f, _)| *f == a).count() >= m.max_following {
                    Err("limit")
                } else {
                    Ok(())
                };
                let got = h.svc().graph.follow(UserId(a), UserId(b)).await.map(|_| ()).map_err(|e| kind_of(&e));
                assert_eq!(got, want, "{ctx}: follow {a}->{b}");
                if got.is_ok() && m.follows.insert((a, b)) {
                    m.start(b, Ident::Follow, a, h.svc().node().now().0);
                }
            }
            15..=19 => {
                // batch follow
                let targets: Vec<u64> =
                    (0..rng.random_range(1..5)).map(|_| rng.random_range(1..=USERS)).filter(|t| *t != a).collect();
                let res = h
                    .svc()
                    .graph
                    .follow_many(UserId(a), &targets.iter().map(|t| UserId(*t)).collect::<Vec<_>>())
                    .await
                    .expect("batch");
                for (t, st) in res {
                    let t = t.0;
                    let ok = matches!(
                        st,
                        tideway_store::FollowStatus::Followed(_) | tideway_store::FollowStatus::Already(_)
                    );
                    if let tideway_store::FollowStatus::Followed(at) = st {
                        assert!(!m.follows(a, t) && !m.blocked(a, t), "{ctx}: batch followed {t} wrongly");
                        m.follows.insert((a, t));
                        m.start(t, Ident::Follow, a, at.0);
                    }
                    if !ok {
                        assert!(
                            m.blocked(a, t) || m.follows.iter().filter(|(f, _)| *f == a).count() >= m.max_following
                        );
                    }
                }
            }
            20..=27 => {
                // unfollow
                h.svc().graph.unfollow(UserId(a), UserId(b)).await.expect("unfollow");
                m.follows.remove(&(a, b));
            }
            28..=45 => {
                // post (sometimes a card)
                let card = rng.random_bool(0.1);
                let vis = pick_vis(&mut rng);
                let mentions: Vec<u64> = if rng.random_bool(0.3) { vec![b] } else { vec![] };
                let kind = if card { ItemKind::User } else { ItemKind::Post };
                let tags: Vec<&'static str> = TAGS.iter().copied().filter(|_| rng.random_bool(0.4)).collect();
                let object =
                    if rng.random_bool(0.3) { Some(OBJECTS[rng.random_range(0..OBJECTS.len())]) } else { None };
                let mut new = post(a, kind, vis, mentions.clone());
                // Tags as written (any case): feeds match them lowercased.
                new.tags = tags
                    .iter()
                    .map(|t| if rng.random_bool(0.5) { t.to_uppercase() } else { (*t).to_owned() })
                    .collect();
                new.object = object.map(|o| tideway_core::ObjectRef { kind: "book".into(), id: o.into() });
                let (v, created) = h.svc().items.create_item(new).await.expect("post");
                assert!(created);
                let id = v.item.id.0;
                m.items.insert(
                    id,
                    MItem {
                        id,
                        author: a,
                        card,
                        vis,
                        mentions: mentions.clone(),
                        tags: tags.clone(),
                        object,
                        repost_of: None,
                        reply_to: None,
                        reply_to_author: None,
                        deleted: false,
                    },
                );
                for u in mentions.clone() {
                    m.start(u, Ident::Mention(id), a, item_time(id));
                }
            }
            46..=57 => {
                // repost
                let Some(t) = any_item(&mut rng, &m) else { continue };
                let target = m.items[&t].clone();
                let orig = target.repost_of.map_or(target.clone(), |o| m.items[&o].clone());
                let want = if target.deleted || orig.deleted {
                    Err("not_found")
                } else if orig.vis != Visibility::Public || m.blocked(a, orig.author) {
                    Err("forbidden")
                } else {
                    Ok(())
                };
                let mut n = post(a, ItemKind::Repost, Visibility::Public, vec![]);
                n.repost_of = Some(ItemId(t));
                let got = h.svc().items.create_item(n).await;
                match (&got, want) {
                    (Ok((v, created)), Ok(())) => {
                        let existing = m
                            .items
                            .values()
                            .find(|r| r.author == a && r.repost_of == Some(orig.id) && !r.deleted)
                            .map(|r| r.id);
                        assert_eq!(
                            v.item.repost_of,
                            Some(ItemId(orig.id)),
                            "{ctx}: repost of a repost reposts the original"
                        );
                        match existing {
                            Some(e) => assert!(!created && v.item.id.0 == e, "{ctx}: repeated repost is idempotent"),
                            None => {
                                assert!(*created);
                                let id = v.item.id.0;
                                m.items.insert(
                                    id,
                                    MItem {
                                        id,
                                        author: a,
                                        card: false,
                                        vis: Visibility::Public,
                                        mentions: vec![],
                                        tags: vec![],
                                        object: None,
                                        repost_of: Some(orig.id),
                                        reply_to: None,
                                        reply_to_author: None,
                                        deleted: false,
                                    },
                                );
                                m.start(orig.author, Ident::Repost(orig.id, id), a, item_time(id));
                            }
                        }
                    }
                    (Err(e), Err(w)) => assert_eq!(kind_of(e), w, "{ctx}: repost error"),
                    (g, w) => panic!("{ctx}: repost {a} of {t}: got {g:?}, want {w:?}"),
                }
            }
            58..=65 => {
                // reply
                let Some(t) = any_item(&mut rng, &m) else { continue };
                let parent = m.items[&t].clone();
                let want = if parent.deleted {
                    Err("not_found")
                } else if a != parent.author && m.blocked(a, parent.author) {
                    Err("forbidden")
                } else if !m.visible(&parent, Some(a)) {
                    Err("not_found")
                } else {
                    Ok(())
                };
                let vis = pick_vis(&mut rng);
                let mut n = post(a, ItemKind::Reply, vis, vec![]);
                n.reply_to = Some(ItemId(t));
                match (h.svc().items.create_item(n).await, want) {
                    (Ok((v, _)), Ok(())) => {
                        let id = v.item.id.0;
                        m.items.insert(
                            id,
                            MItem {
                                id,
                                author: a,
                                card: false,
                                vis,
                                mentions: vec![],
                                tags: vec![],
                                object: None,
                                repost_of: None,
                                reply_to: Some(t),
                                reply_to_author: Some(parent.author),
                                deleted: false,
                            },
                        );
                        m.start(parent.author, Ident::Reply(id), a, item_time(id));
                    }
                    (Err(e), Err(w)) => assert_eq!(kind_of(&e), w, "{ctx}: reply error"),
                    (g, w) => panic!("{ctx}: reply: got {g:?}, want {w:?}"),
                }
            }
            66..=71 => {
                // delete
                let Some(t) = any_item(&mut rng, &m) else { continue };
                h.svc().items.delete_item(ItemId(t), None).await.expect("delete");
                if let Some(i) = m.items.get_mut(&t) {
                    i.deleted = true;
                }
            }
            72..=76 => {
                // change visibility of an original
                let Some(t) = any_item(&mut rng, &m) else { continue };
                let it = m.items[&t].clone();
                if it.repost_of.is_some() {
                    continue;
                }
                let vis = pick_vis(&mut rng);
                let got = h.svc().items.patch_item(ItemId(t), None, Some(vis), None).await.map_err(|e| kind_of(&e));
                if it.deleted {
                    assert_eq!(got.err(), Some("not_found"));
                } else {
                    assert!(got.is_ok(), "{ctx}: patch");
                    if let Some(i) = m.items.get_mut(&t) {
                        i.vis = vis;
                    }
                }
            }
            77..=80 => {
                if a == b {
                    continue;
                }
                let on = rng.random_bool(0.6);
                h.svc().graph.set_block(UserId(a), UserId(b), on).await.expect("block");
                if on {
                    m.blocks.insert((a, b));
                    m.follows.remove(&(a, b));
                    m.follows.remove(&(b, a));
                } else {
                    m.blocks.remove(&(a, b));
                }
            }
            81..=84 => {
                if a == b {
                    continue;
                }
                let on = rng.random_bool(0.6);
                h.svc().graph.set_mute(UserId(a), UserId(b), on).await.expect("mute");
                if on {
                    m.mutes.insert((a, b));
                } else {
                    m.mutes.remove(&(a, b));
                }
            }
            85..=88 => {
                // direct insert
                let Some(t) = any_item(&mut rng, &m) else { continue };
                let got = h.svc().feeds.insert_home(UserId(a), ItemId(t)).await;
                // Only what the owner may see can be inserted (else 404, as unknown).
                let o = &m.items[&t];
                if o.deleted || !m.visible(o, Some(a)) || m.blocked(a, o.author) {
                    assert_eq!(got.map(|_| ()).map_err(|e| kind_of(&e)), Err("not_found"));
                } else {
                    let entry = got.expect("insert");
                    let key = tideway_core::Cursor::decode(&entry.cursor, &tideway_core::FeedScope::Home(a))
                        .expect("the entry's cursor")
                        .key;
                    m.inserts.push((a, key, t));
                }
            }
            89..=93 => {
                // a read: creates or uses the inbox while deliveries may lag
                let _ = h
                    .svc()
                    .feeds
                    .home(UserId(a), &PageRequest { limit: Some(2), ..Default::default() })
                    .await
                    .expect("home");
            }
            94..=96 => {
                let _ = h.worker().step().await.expect("step");
            }
            97 => {
                if rng.random_bool(0.5) {
                    h.svc().backend().drop_inbox(UserId(a)).await.expect("drop");
                } else {
                    h.svc().ops.sweep_inactive().await.expect("sweep");
                }
            }
            98 => {
                if restartable {
                    let clean = rng.random_bool(0.5);
                    h.restart(clean, rng.random_range(0..2)).await;
                    // Snapshots live in the shared half: one process's go
                    // with it; Redis keeps them unless flushed.
                    let kept = clean && matches!(h.kind, Kind::Scaled { .. });
                    for w in &mut m.walks {
                        w.lost |= !kept;
                    }
                }
            }
            99..=107 => {
                // react / take back
                let Some(t) = any_item(&mut rng, &m) else { continue };
                let kind: &'static str = if rng.random_bool(0.7) { "like" } else { "wow" };
                let on = rng.random_bool(0.7);
                let it = m.items[&t].clone();
                let want = if it.deleted || !m.visible(&it, Some(a)) {
                    Err("not_found")
                } else if on && a != it.author && m.blocked(a, it.author) {
                    Err("forbidden")
                } else {
                    Ok(())
                };
                let got = h.svc().items.react(ItemId(t), UserId(a), kind, on).await.map_err(|e| kind_of(&e));
                assert_eq!(got.as_ref().map(|_| ()).map_err(|e| *e), want, "{ctx}: react {a} {kind} {on} on {t}");
                if got.is_ok() {
                    if on {
                        if m.reactions.insert((t, a, kind)) {
                            m.start(it.author, Ident::Reaction(t, kind), a, h.svc().node().now().0);
                        }
                    } else {
                        m.reactions.remove(&(t, a, kind));
                    }
                    let n = m.reactions.iter().filter(|r| r.0 == t && r.2 == kind).count() as u64;
                    assert_eq!(got.map(|c| c.of_kind(kind)), Ok(n), "{ctx}: counts after react");
                }
            }
            112..=117 => {
                // move a notification mark: to a listed group, or to the newest
                use tideway_core::notify::Mark;
                let which = if rng.random_bool(0.5) { Mark::Read } else { Mark::Seen };
                let (rows, _, _) = m.notifications(a);
                let k = (!rows.is_empty() && rng.random_bool(0.6)).then(|| rng.random_range(0..rows.len()));
                let up_to = match k {
                    Some(k) => {
                        let page = h.svc().notifications.page(UserId(a), Some(100), None).await.expect("notifications");
                        assert_eq!(page.groups.len(), rows.len(), "{ctx}: notifications({a}) before a mark");
                        Some(page.groups[k].id)
                    }
                    None => None,
                };
                h.svc().notifications.mark(UserId(a), which, up_to).await.expect("mark");
                let to = match k {
                    Some(k) => Some(rows[k].1),
                    None => rows.first().map(|r| r.1),
                };
                if let Some(to) = to {
                    let mark = m.marks.entry(a).or_insert((i64::MIN, i64::MIN));
                    match which {
                        Mark::Seen => mark.0 = mark.0.max(to),
                        Mark::Read => mark.1 = mark.1.max(to),
                    }
                }
            }
            108..=111 => {
                // promote an item for a while
                let Some(t) = any_item(&mut rng, &m) else { continue };
                let now = h.svc().node().now().0;
                let (every, start, end) =
                    (rng.random_range(1..=3u32), now - rng.random_range(0..5), now + rng.random_range(1..150));
                let got = h.svc().items.create_promotion(ItemId(t), every, Millis(start), Millis(end)).await;
                if m.items[&t].deleted {
                    assert_eq!(got.map(|_| ()).map_err(|e| kind_of(&e)), Err("not_found"));
                } else {
                    let p = got.expect("promotion");
                    m.promotions.push((p.id, t, every, start, end));
                }
            }
            118..=125 => {
                // an anchor plans a session
                let now = h.svc().node().now().0;
                let at = now + rng.random_range(-5..50);
                let mut body = serde_json::Map::new();
                body.insert("n".into(), serde_json::json!(step));
                let body = tideway_core::Body::new(&body);
                let s =
                    h.svc().live.create_session(UserId(a), Millis(at), body.clone()).await.expect("create a session");
                assert_eq!(
                    (s.anchor, s.scheduled_start, s.started_at, s.ended_at, &s.body),
                    (UserId(a), Millis(at), None, None, &body),
                    "{ctx}: a new session"
                );
                m.sessions.insert(s.id, s);
            }
            126..=133 => {
                // start or end a session (or an unknown one)
                let ids: Vec<u64> = m.sessions.keys().copied().collect();
                let id =
                    if ids.is_empty() || rng.random_bool(0.05) { 424_242 } else { ids[rng.random_range(0..ids.len())] };
                let step_ = if rng.random_bool(0.5) { Move::Start } else { Move::End };
                let now = h.svc().node().now();
                let want = match m.sessions.get(&id) {
                    None => Err("not_found"),
                    Some(s) => match (step_, s.started_at, s.ended_at) {
                        (Move::Start, None, None) => Ok(Session { started_at: Some(now), ..s.clone() }),
                        (Move::End, Some(t), None) => Ok(Session { ended_at: Some(now.max(t)), ..s.clone() }),
                        _ => Err("conflict"),
                    },
                };
                let got = h.svc().live.move_session(id, step_).await.map_err(|e| kind_of(&e));
                assert_eq!(got, want, "{ctx}: {step_:?} session {id}");
                if let Ok(s) = got {
                    m.sessions.insert(id, s);
                }
            }
            134..=141 => {
                // a viewer opens their live feed
                let limit = rng.random_range(1..=3);
                let taken = h.svc().node().now().0;
                let mut w = MWalk {
                    viewer: a,
                    limit,
                    cursor: String::new(),
                    taken,
                    snap: m.live_snapshot(a),
                    at: MPos::Snap(0),
                    lost: false,
                };
                let page = h.svc().live.page(UserId(a), None, Some(limit)).await.expect("live page");
                if live_step(&m, &mut w, page, &ctx) {
                    m.walks.push(w);
                }
            }
            142..=149 => {
                // a walk goes on (or finds its snapshot expired)
                if m.walks.is_empty() {
                    continue;
                }
                let i = rng.random_range(0..m.walks.len());
                let mut w = m.walks.remove(i);
                let now = h.svc().node().now().0;
                let got = h.svc().live.page(UserId(w.viewer), Some(&w.cursor), Some(w.limit)).await;
                if w.lost || now - w.taken > LIVE_TTL_MS {
                    assert_eq!(got.map(|_| ()).map_err(|e| kind_of(&e)), Err("expired"), "{ctx}: an expired walk");
                    live_seen(1, 1);
                } else if live_step(&m, &mut w, got.expect("live page"), &ctx) {
                    m.walks.push(w);
                }
            }
            _ => unreachable!("drawn from 0..150"),
        }
        if step % 60 == 59 {
            check_all(&h, &m, &format!("seed {seed} step {step}")).await;
            check_postings(&h, &m, &format!("seed {seed} step {step}")).await;
            check_notifications(&h, &m, &format!("seed {seed} step {step}")).await;
        }
    }
    check_all(&h, &m, &format!("seed {seed} end")).await;
    check_postings(&h, &m, &format!("seed {seed} end")).await;
    check_notifications(&h, &m, &format!("seed {seed} end")).await;
}

/// Checks a live page against the reference's walk and moves the walk on;
/// whether the walk goes on.
fn live_step(m: &Model, w: &mut MWalk, page: tideway_service::LivePage, ctx: &str) -> bool {
    let rest = m.live_rest(w, w.at);
    let want: Vec<Session> = rest.iter().take(w.limit).map(|(s, _)| s.clone()).collect();
    assert_eq!(page.entries, want, "{ctx}: live page of {} from {:?} (snapshot {:?})", w.viewer, w.at, w.snap);
    let more = rest.len() > w.limit;
    assert_eq!(page.next_cursor.is_some(), more, "{ctx}: live next_cursor");
    if w.at != MPos::Snap(0) {
        live_seen(0, 1);
    }
    live_seen(2, want.iter().filter(|s| m.sessions[&s.id] != **s).count() as u64);
    live_seen(3, rest.iter().take(w.limit).filter(|(_, p)| matches!(p, MPos::Replay(..))).count() as u64);
    match page.next_cursor {
        Some(c) => {
            w.at = rest[w.limit - 1].1;
            w.cursor = c;
            true
        }
        None => false,
    }
}

/// An item's time: the one its id carries.
fn item_time(id: u64) -> i64 {
    tideway_core::ids::key_time(id).0
}

#[tokio::test]
async fn pushed_pages_equal_the_pull_definition_in_memory() {
    for seed in 0..120 {
        run(seed, Kind::Memory, 240).await;
    }
    // The live walks met what they are there for.
    let seen: Vec<u64> = LIVE_SEEN.iter().map(|n| n.load(std::sync::atomic::Ordering::Relaxed)).collect();
    eprintln!("live walks: later pages, expired, shown in an older state, replays: {seen:?}");
    assert!(seen.iter().all(|n| *n > 0), "some live walk case never happened: {seen:?}");
}

#[tokio::test]
async fn pushed_pages_equal_the_pull_definition_embedded_with_restarts() {
    for seed in 1000..1020 {
        run(seed, Kind::Fjall(tempfile::tempdir().expect("tempdir"), Held::Kept), 200).await;
    }
}

/// The embedded store, every storage call loading what it reads from disk
/// (the lazy index's loads, everywhere, against the model).
#[tokio::test]
async fn pushed_pages_equal_the_pull_definition_embedded_loading_every_call() {
    for seed in 1100..1108 {
        run(seed, Kind::Fjall(tempfile::tempdir().expect("tempdir"), Held::Cold), 200).await;
    }
}

/// The embedded store with an index budget of one byte: loaded units are
/// let go all the time, between a write and its fsync too, and pages must
/// still equal the model.
#[tokio::test]
async fn pushed_pages_equal_the_pull_definition_embedded_under_a_tiny_index_budget() {
    for seed in 1200..1208 {
        run(seed, Kind::Fjall(tempfile::tempdir().expect("tempdir"), Held::Tiny), 200).await;
    }
}

/// Two nodes on PostgreSQL or MariaDB and one Redis, calls spread over both,
/// nodes restarting and Redis flushed in the middle (the engines come from
/// `scripts/services.sh up`).
async fn scaled(var: &str, seeds: std::ops::Range<u64>) {
    let base =
        std::env::var(var).unwrap_or_else(|_| panic!("{var} is not set: run `eval \"$(scripts/services.sh up)\"`"));
    let redis = std::env::var("TIDEWAY_TEST_REDIS_URL").expect("TIDEWAY_TEST_REDIS_URL is not set");
    for seed in seeds {
        let db = tideway_store_sql::testing::FreshDatabase::create(&base).await.expect("a fresh database");
        let prefix = format!("model{seed}x{}:", std::process::id());
        run(seed, Kind::Scaled { db: db.url.clone(), redis: redis.clone(), prefix: prefix.clone() }, 200).await;
        let mut ro = tideway_store_redis::RedisOptions::new(vec![redis.clone()], 4);
        ro.prefix = prefix;
        tideway_store_redis::RedisShared::connect(ro).await.expect("redis").purge().await.expect("purge");
        db.drop().await.expect("drop the database");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_postgres_and_redis_serve_the_pull_definition() {
    scaled("TIDEWAY_TEST_POSTGRES_URL", 2000..2006).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_on_mariadb_and_redis_serve_the_pull_definition() {
    scaled("TIDEWAY_TEST_MYSQL_URL", 3000..3006).await;
}
