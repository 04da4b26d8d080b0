//! Every page of the service against the reference: feeds walked both
//! ways at several sizes, hydration, postings, notifications.

use super::*;

/// The pages of a walk from the top with promotions woven in: after organic
/// entry k (1-based from the top) when k % every == 0, each promotion at most
/// once per page, `limit` rows a page, an organic row cut off going to the
/// next page.
pub(crate) fn expected_pages(organic: &[Row], promos: &[(u64, u32)], limit: usize) -> Vec<Vec<Row>> {
    let mut pages = Vec::new();
    let mut s = 0;
    loop {
        let mut rows: Vec<Row> = Vec::new();
        let mut used = vec![false; promos.len()];
        for (off, row) in organic[s..organic.len().min(s + limit)].iter().enumerate() {
            let k = s + off + 1;
            rows.push(row.clone());
            for (i, &(item, every)) in promos.iter().enumerate() {
                if !used[i] && k % every as usize == 0 {
                    used[i] = true;
                    rows.push((item, "promoted", vec![]));
                }
            }
        }
        rows.truncate(limit);
        let taken = rows.iter().filter(|r| r.1 != "promoted").count();
        pages.push(rows);
        s += taken;
        if s >= organic.len() {
            return pages;
        }
    }
}

pub(crate) fn rows_of(p: &Page) -> Vec<Row> {
    p.entries
        .iter()
        .map(|e| {
            (e.item.item.id.0, e.reason.as_str(), e.sources.iter().map(|s| (s.user.0, s.item.0)).collect::<Vec<_>>())
        })
        .collect()
}

/// Walks a feed older to the end, then newer back to the top, checking both
/// against `want` (organic) and the older walk page by page against `pages`
/// (with promotions), and that `limit` is honoured.
pub(crate) async fn check_feed(
    what: &str,
    want: &[Row],
    pages: &[Vec<Row>],
    limit: usize,
    read: impl AsyncFn(&PageRequest) -> Page,
) {
    let organic = |rows: Vec<Row>| -> Vec<Row> { rows.into_iter().filter(|r| r.1 != "promoted").collect() };
    let mut got_pages: Vec<Vec<Row>> = Vec::new();
    let mut req = PageRequest { limit: Some(limit), ..Default::default() };
    let mut last_cursor = None;
    loop {
        let page = read(&req).await;
        let rows = rows_of(&page);
        assert!(rows.len() <= limit, "{what}: page of {} > limit {limit}", rows.len());
        if page.next_cursor.is_some() {
            assert_eq!(rows.len(), limit, "{what}: short page with a next cursor");
        }
        if let Some(e) = page.entries.iter().rev().find(|e| e.reason.as_str() != "promoted") {
            last_cursor = Some(e.cursor.clone());
        }
        got_pages.push(rows);
        match page.next_cursor {
            Some(c) => req = PageRequest { limit: Some(limit), before: Some(c), after: None },
            None => break,
        }
        assert!(got_pages.len() <= want.len() + 2, "{what}: runaway paging");
    }
    let got: Vec<Row> = organic(got_pages.iter().flatten().cloned().collect());
    assert_eq!(got, want, "{what}: walking older with limit {limit}");
    assert_eq!(got_pages, pages, "{what}: pages with promotions, limit {limit}");
    // Newer, from the bottom entry back up to the top.
    let Some(bottom) = last_cursor else { return };
    let mut up: Vec<Row> = vec![want[want.len() - 1].clone()];
    let mut after = bottom;
    loop {
        let page = read(&PageRequest { limit: Some(limit), before: None, after: Some(after.clone()) }).await;
        let rows = rows_of(&page);
        assert!(rows.len() <= limit, "{what}: newer page over limit");
        let rows = organic(rows);
        if rows.is_empty() {
            break;
        }
        let mut merged = rows;
        merged.extend(up);
        up = merged;
        after = page.prev_cursor.clone().expect("a non-empty page has a prev cursor");
        assert!(up.len() <= want.len() + 1, "{what}: runaway newer paging");
    }
    assert_eq!(up, want, "{what}: walking newer with limit {limit}");
}

/// Every entry's counts and viewer marks equal the model's.
pub(crate) fn check_hydration(what: &str, m: &Model, viewer: u64, page: &Page) {
    for e in &page.entries {
        let o = e.item.item.id.0;
        let (per, mine, replies, reposts) = m.hydration(o, viewer);
        let c = &e.item.counts;
        assert_eq!((&c.reactions, c.replies, c.reposts), (&per, replies, reposts), "{what}: counts of {o}");
        let marks = e.item.viewer.as_ref().expect("a home page has a viewer");
        assert_eq!(marks.reactions, mine, "{what}: viewer reactions on {o}");
        assert_eq!(marks.reposted, m.live_reposts(o).iter().any(|r| r.author == viewer), "{what}: reposted {o}");
    }
}

pub(crate) async fn check_all(h: &Harness, m: &Model, ctx: &str) {
    h.drain().await;
    let now = h.svc().node().now().0;
    for u in 1..=USERS {
        let want = m.home(u);
        let promos = m.promos_for(u, now);
        for limit in [1, 2, 3, 7] {
            let pages = expected_pages(&want, &promos, limit);
            check_feed(&format!("{ctx} home({u})"), &want, &pages, limit, async |r: &PageRequest| {
                h.svc().feeds.home(UserId(u), r).await.expect("home")
            })
            .await;
        }
        let all =
            h.svc().feeds.home(UserId(u), &PageRequest { limit: Some(100), ..Default::default() }).await.expect("home");
        check_hydration(&format!("{ctx} home({u})"), m, u, &all);
        let want = m.mentions(u);
        for limit in [2, 5] {
            let pages = expected_pages(&want, &[], limit);
            check_feed(&format!("{ctx} mentions({u})"), &want, &pages, limit, async |r: &PageRequest| {
                h.svc().feeds.mentions(UserId(u), r).await.expect("mentions")
            })
            .await;
        }
        for v in [None, Some(1), Some(u % USERS + 1)] {
            let want = m.profile(u, v);
            for limit in [2, 5] {
                let pages = expected_pages(&want, &[], limit);
                check_feed(&format!("{ctx} profile({u}) by {v:?}"), &want, &pages, limit, async |r: &PageRequest| {
                    h.svc().feeds.profile(UserId(u), v.map(UserId), r).await.expect("profile")
                })
                .await;
            }
        }
    }
}

/// The tags and objects posts carry (a few, so feeds hold many items).
pub(crate) const TAGS: [&str; 2] = ["rust", "db"];
pub(crate) const OBJECTS: [&str; 2] = ["1", "2"];

/// Every tag and object feed, by every kind of viewer, walked both ways.
pub(crate) async fn check_postings(h: &Harness, m: &Model, ctx: &str) {
    for v in [None, Some(1), Some(2)] {
        for t in TAGS {
            let want = m.tagged(|i| i.tags.contains(&t), v);
            for limit in [2, 5] {
                let pages = expected_pages(&want, &[], limit);
                // Asked in capitals: matched lowercased.
                let asked = if limit == 2 { t.to_uppercase() } else { t.to_owned() };
                check_feed(&format!("{ctx} tag({t}) by {v:?}"), &want, &pages, limit, async |r: &PageRequest| {
                    h.svc().feeds.tag_feed(&asked, v.map(UserId), r).await.expect("tag")
                })
                .await;
            }
        }
        for o in OBJECTS {
            let want = m.tagged(|i| i.object == Some(o), v);
            let pages = expected_pages(&want, &[], 3);
            check_feed(&format!("{ctx} object(book, {o}) by {v:?}"), &want, &pages, 3, async |r: &PageRequest| {
                h.svc().feeds.object_feed("book", o, v.map(UserId), r).await.expect("object")
            })
            .await;
        }
    }
}

/// A service group as the reference compares it.
pub(crate) fn nrow(g: &tideway_service::NotificationGroup) -> NRow {
    use tideway_core::notify::Verb;
    let kind: Option<&'static str> = match &g.verb {
        Verb::Reaction { kind, .. } => Some(if kind == "like" { "like" } else { "wow" }),
        _ => None,
    };
    (
        (g.verb.name(), g.verb.item().map(|i| i.0), kind),
        g.latest_at.0,
        g.actors.iter().map(|a| a.0).collect(),
        g.actor_count,
        g.seen,
        g.read,
    )
}

/// Every user's notifications, walked page by page at two sizes: each group
/// once, whole, with its item, and the exact counts on every page.
pub(crate) async fn check_notifications(h: &Harness, m: &Model, ctx: &str) {
    for u in 1..=USERS {
        let (want, unseen, unread) = m.notifications(u);
        for limit in [2, 5] {
            let mut got = Vec::new();
            let mut before: Option<String> = None;
            loop {
                let page =
                    h.svc().notifications.page(UserId(u), Some(limit), before.as_deref()).await.expect("notifications");
                assert!(page.groups.len() <= limit, "{ctx}: notifications({u}) over limit");
                assert_eq!((page.unseen, page.unread), (unseen, unread), "{ctx}: notifications({u}) counts");
                for g in &page.groups {
                    assert_eq!(
                        g.item.as_ref().map(|i| i.item.id),
                        g.verb.item(),
                        "{ctx}: notifications({u}) group {} shows its item",
                        g.id
                    );
                }
                got.extend(page.groups.iter().map(nrow));
                match page.next_cursor {
                    Some(c) => before = Some(c),
                    None => break,
                }
                assert!(got.len() <= want.len() + limit, "{ctx}: runaway notification paging");
            }
            assert_eq!(got, want, "{ctx}: notifications({u}) with limit {limit}");
        }
    }
}
