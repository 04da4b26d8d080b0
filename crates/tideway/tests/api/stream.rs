//! The home stream over HTTP with a real Server-Sent Events client: entries
//! in order (pushed and a hot author's pulled ones alike), each exactly as
//! the home page shows it, cursor included; a disconnect and a resume with
//! no gap and no duplicate, from an entry's id or a delete's; deletes while
//! connected (a delete, an unfollow), `reset` for an id it cannot resume
//! from, and what a client holds equal to the top of the REST page.

use crate::helpers::*;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::Duration;

/// One event as received.
#[derive(Debug, Clone, PartialEq)]
pub struct Sse {
    pub event: String,
    pub id: String,
    pub data: Value,
}

/// A connected stream: reads events off the response body.
pub struct Client {
    resp: reqwest::Response,
    buf: String,
}

impl Client {
    pub async fn connect(s: &TestServer, u: u64, last_id: Option<&str>) -> Client {
        Self::connect_to(&s.client, &s.base, s.token.as_deref(), u, last_id).await
    }

    /// A stream of `u` on the server at `base`.
    pub async fn connect_to(
        client: &reqwest::Client,
        base: &str,
        token: Option<&str>,
        u: u64,
        last_id: Option<&str>,
    ) -> Client {
        let mut req = client.get(format!("{base}/v1/users/{u}/home/stream"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        if let Some(id) = last_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.expect("connect");
        assert_eq!(resp.status(), StatusCode::OK);
        let ctype = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or_default().to_owned();
        assert!(ctype.starts_with("text/event-stream"), "{ctype}");
        assert_eq!(resp.headers().get("x-accel-buffering").and_then(|v| v.to_str().ok()), Some("no"));
        Client { resp, buf: String::new() }
    }

    /// The next event (comments and `retry:` skipped), waiting at most `wait`.
    pub async fn next(&mut self, wait: Duration) -> Option<Sse> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut event, mut id, mut data) = (String::new(), String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event: ") {
                        event = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("id: ") {
                        id = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                if event.is_empty() {
                    continue;
                }
                let data = serde_json::from_str(&data).unwrap_or_else(|_| panic!("event data is not JSON: {data:?}"));
                return Some(Sse { event, id, data });
            }
            // A timeout, the end of the stream, or the connection gone (a
            // killed server): no event.
            let chunk = tokio::time::timeout_at(deadline, self.resp.chunk()).await.ok()?.ok()??;
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// The next `n` events, each within `wait` (panics on fewer).
    pub async fn take(&mut self, n: usize, wait: Duration) -> Vec<Sse> {
        let mut out = Vec::new();
        while out.len() < n {
            match self.next(wait).await {
                Some(e) => out.push(e),
                None => panic!("{} of {n} events came: {out:?}", out.len()),
            }
        }
        out
    }

    /// Events until none comes for `quiet`.
    pub async fn drain(&mut self, quiet: Duration) -> Vec<Sse> {
        let mut out = Vec::new();
        while let Some(e) = self.next(quiet).await {
            out.push(e);
        }
        out
    }
}

/// What a client holds after these events: item ids, oldest first.
fn apply(held: &mut Vec<String>, events: &[Sse]) {
    for e in events {
        match e.event.as_str() {
            "entry" => {
                let id = e.data["item"]["id"].as_str().expect("item id").to_owned();
                assert!(!held.contains(&id), "a duplicate entry: {id}");
                held.push(id);
            }
            "delete" => {
                let id = e.data["item"].as_str().expect("item id");
                held.retain(|h| h != id);
            }
            other => panic!("unexpected {other} event: {e:?}"),
        }
    }
}

/// The REST home's entries after `cursor`, oldest first.
async fn home_after(s: &TestServer, u: u64, cursor: &str) -> Vec<String> {
    let (ids, _) = s.home_ids(u, &format!("after={cursor}&limit=100")).await;
    ids.into_iter().rev().collect()
}

const QUIET: Duration = Duration::from_millis(400);

#[tokio::test]
async fn entries_arrive_in_order_and_a_resume_has_no_gap_and_no_duplicate() {
    // Author 3 is hot (2 followers): their posts are pulled, not pushed.
    let s = spawn_with(|c| c.fanout.hot_followers = 2).await;
    for (u, t) in [(1, 2), (1, 3), (4, 3)] {
        s.follow(u, t).await;
    }
    let start = s.post_item(2, json!({"body": {"t": "before"}})).await;
    s.drained().await;
    let (_, first) = s.get("/v1/users/1/home?limit=1").await;
    let top = first["prev_cursor"].as_str().expect("a cursor").to_owned();
    assert_eq!(first["entries"][0]["item"]["id"], json!(start));

    let mut c = Client::connect(&s, 1, Some(&top)).await;
    let mut posted = Vec::new();
    for (i, author) in [2, 3, 1, 2, 3].into_iter().enumerate() {
        posted.push(s.post_item(author, json!({"body": {"n": i}})).await);
    }
    let events = c.drain(QUIET).await;
    let mut held = Vec::new();
    apply(&mut held, &events);
    assert_eq!(held, posted, "every post, oldest first, the hot author's too");
    let ids: Vec<&str> = events.iter().map(|e| e.id.as_str()).collect();
    let cursors: Vec<&str> = events.iter().map(|e| e.data["cursor"].as_str().expect("cursor")).collect();
    assert_eq!(ids, cursors, "an entry's id is its cursor");
    assert_eq!(held, home_after(&s, 1, &top).await, "what the client holds is the top of the page");

    // Away: three more posts; back with the last id: exactly those.
    let last = events.last().expect("events").id.clone();
    drop(c);
    let mut missed = Vec::new();
    for author in [3, 2, 2] {
        missed.push(s.post_item(author, json!({})).await);
    }
    let mut c = Client::connect(&s, 1, Some(&last)).await;
    let events = c.drain(QUIET).await;
    apply(&mut held, &events);
    assert_eq!(events.len(), 3, "no duplicate: {events:?}");
    assert_eq!(held[held.len() - 3..], missed[..]);
    assert_eq!(held, home_after(&s, 1, &top).await);
    drop(c);
    s.stop().await;
}

#[tokio::test]
async fn entries_that_leave_the_home_are_deleted_while_connected() {
    let s = spawn().await;
    for t in [2, 3] {
        s.follow(1, t).await;
    }
    let mut c = Client::connect(&s, 1, None).await;
    let a = s.post_item(2, json!({})).await;
    let b = s.post_item(3, json!({})).await;
    let b2 = s.post_item(3, json!({})).await;
    let d = s.post_item(2, json!({})).await;
    let mut held = Vec::new();
    apply(&mut held, &c.drain(QUIET).await);
    assert_eq!(held, vec![a.clone(), b.clone(), b2.clone(), d.clone()]);
    // A delete, then an unfollow: their entries leave.
    assert_eq!(s.delete(&format!("/v1/items/{a}")).await.0, StatusCode::NO_CONTENT);
    let events = c.drain(QUIET).await;
    assert_eq!(events.iter().map(|e| e.event.as_str()).collect::<Vec<_>>(), ["delete"]);
    assert_eq!(events[0].data, json!({"item": a}));
    apply(&mut held, &events);
    assert_eq!(s.delete("/v1/users/1/following/3").await.0, StatusCode::NO_CONTENT);
    apply(&mut held, &c.drain(QUIET).await);
    assert_eq!(held, vec![d.clone()]);
    // A new post after all that.
    let e = s.post_item(2, json!({})).await;
    apply(&mut held, &c.drain(QUIET).await);
    assert_eq!(held, vec![d, e]);
    drop(c);
    s.stop().await;
}

#[tokio::test]
async fn an_id_it_cannot_resume_from_gets_a_reset_then_the_stream_goes_on() {
    let s = spawn_with(|c| c.stream.replay_window = tideway_config::HumanDuration(Duration::from_millis(500))).await;
    s.follow(1, 2).await;
    let old = s.post_item(2, json!({})).await;
    let (_, page) = s.get("/v1/users/1/home").await;
    let old_cursor = page["entries"][0]["cursor"].as_str().expect("cursor").to_owned();
    let (_, other) = s.get("/v1/users/2/home").await;
    let foreign = other["prev_cursor"].as_str().expect("user 2's cursor").to_owned();
    for id in ["garbage", foreign.as_str()] {
        let mut c = Client::connect(&s, 1, Some(id)).await;
        let e = c.next(QUIET).await.expect("an event");
        assert_eq!(e.event, "reset", "{id}: {e:?}");
        assert!(e.data["reason"].as_str().is_some_and(|r| !r.is_empty()));
        assert_eq!(home_after(&s, 1, &e.id).await, Vec::<String>::new(), "a reset's id is the top now");
        let fresh = s.post_item(2, json!({})).await;
        let next = c.next(QUIET).await.expect("the stream goes on");
        assert_eq!((next.event.as_str(), next.data["item"]["id"].clone()), ("entry", json!(fresh)));
    }
    tokio::time::sleep(Duration::from_millis(600)).await;
    let mut c = Client::connect(&s, 1, Some(&old_cursor)).await;
    assert_eq!(c.next(QUIET).await.expect("an event").event, "reset", "older than the replay window");
    assert_ne!(old, "");
    drop(c);
    s.stop().await;
}

#[tokio::test]
async fn a_user_token_streams_only_its_own_home() {
    let mut s = spawn_authed().await;
    s.token = Some(user_token(2));
    assert_error(&s.get("/v1/users/1/home/stream").await, 403, "forbidden");
    s.token = None;
    assert_error(&s.get("/v1/users/1/home/stream").await, 401, "unauthenticated");
    s.token = Some(user_token(1));
    let c = Client::connect(&s, 1, None).await;
    drop(c);
    s.stop().await;
}

#[tokio::test]
async fn entries_that_left_while_away_are_deleted_when_the_stream_resumes() {
    let s = spawn().await;
    for t in [2, 3, 4, 5, 7] {
        s.follow(1, t).await;
    }
    let start = s.post_item(2, json!({})).await;
    s.drained().await;
    let (_, first) = s.get("/v1/users/1/home?limit=1").await;
    let top = first["prev_cursor"].as_str().expect("a cursor").to_owned();
    assert_eq!(first["entries"][0]["item"]["id"], json!(start));
    let mut c = Client::connect(&s, 1, Some(&top)).await;
    let a = s.post_item(2, json!({})).await;
    let b = s.post_item(3, json!({})).await;
    let c6 = s.post_item(6, json!({})).await;
    let r1 = s.post_item(4, json!({"repost_of": c6})).await;
    let d = s.post_item(5, json!({})).await;
    let x = s.post_item(6, json!({})).await;
    let _rx1 = s.post_item(2, json!({"repost_of": x})).await;
    let rx2 = s.post_item(5, json!({"repost_of": x})).await;
    let f = s.post_item(4, json!({})).await;
    let h = s.post_item(7, json!({})).await;
    let e = s.post_item(2, json!({})).await;
    let mut held = Vec::new();
    let events = c.drain(QUIET).await;
    apply(&mut held, &events);
    assert_eq!(held, [a.as_str(), &b, &c6, &d, &x, &f, &h, &e], "a repost shows its original, once");
    assert_ne!(r1, "");
    let last = events.last().expect("events").id.clone();
    drop(c);
    // Nothing left: the resume replays (here: nothing).
    let mut c = Client::connect(&s, 1, Some(&last)).await;
    assert!(c.next(QUIET).await.is_none());
    drop(c);

    // Away: a delete, an unfollow, a visibility change, a mute, a block by
    // the followee; a repost deleted while an earlier one still shows its
    // original (that entry stays); then a new post.
    for (status, _) in [
        s.delete(&format!("/v1/items/{a}")).await,
        s.delete("/v1/users/1/following/3").await,
        s.delete(&format!("/v1/items/{rx2}")).await,
    ] {
        assert_eq!(status, StatusCode::NO_CONTENT);
    }
    assert_eq!(s.patch(&format!("/v1/items/{d}"), json!({"visibility": "mentioned"})).await.0, StatusCode::OK);
    assert_eq!(s.put("/v1/users/1/mutes/4").await.0, StatusCode::OK);
    assert_eq!(s.put("/v1/users/7/blocks/1").await.0, StatusCode::OK);
    // (A removal in the same millisecond as an id is sent again on a resume
    // from it: a later post keeps this test's last resume quiet.)
    tokio::time::sleep(Duration::from_millis(5)).await;
    let g = s.post_item(2, json!({})).await;

    let mut c = Client::connect(&s, 1, Some(&last)).await;
    let events = c.drain(QUIET).await;
    let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(kinds, ["delete", "delete", "delete", "delete", "delete", "delete", "entry"], "{events:?}");
    let mut deleted: Vec<&str> = events[..6].iter().map(|e| e.data["item"].as_str().expect("item")).collect();
    deleted.sort();
    let mut expected = vec![a.as_str(), b.as_str(), c6.as_str(), d.as_str(), f.as_str(), h.as_str()];
    expected.sort();
    assert_eq!(deleted, expected, "exactly the entries that left, each once");
    assert!(events[..6].iter().all(|e| e.id != last), "a delete's id marks its own place");
    apply(&mut held, &events);
    assert_eq!(held, [x.as_str(), &e, &g]);
    assert_eq!(held, home_after(&s, 1, &top).await, "what the client holds is the top of the page");

    // Resumed again from the new position: nothing more to say.
    let last = events.last().expect("events").id.clone();
    drop(c);
    let mut c = Client::connect(&s, 1, Some(&last)).await;
    assert!(c.next(QUIET).await.is_none(), "removals before the id are not sent again");
    drop(c);
    s.stop().await;
}

/// Item ids of events, as `(event, item)`, deletes of one run sorted (they
/// come in no set order).
fn kinds_and_items(events: &[Sse]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut run: Vec<(String, String)> = Vec::new();
    for e in events {
        let item = match e.event.as_str() {
            "entry" => e.data["item"]["id"].as_str(),
            _ => e.data["item"].as_str(),
        };
        let pair = (e.event.clone(), item.expect("an item").to_owned());
        if e.event == "delete" {
            run.push(pair);
        } else {
            run.sort();
            out.append(&mut run);
            out.push(pair);
        }
    }
    run.sort();
    out.append(&mut run);
    out
}

fn ev(kind: &str, item: &str) -> (String, String) {
    (kind.to_owned(), item.to_owned())
}

#[tokio::test]
async fn a_resume_from_a_delete_id_sends_every_missed_event_once_and_nothing_received() {
    let s = spawn().await;
    for t in [2, 3] {
        s.follow(1, t).await;
    }
    let mut c = Client::connect(&s, 1, None).await;
    let a = s.post_item(2, json!({})).await;
    let b = s.post_item(3, json!({})).await;
    let c3 = s.post_item(2, json!({})).await;
    let first = c.drain(QUIET).await;
    assert_eq!(kinds_and_items(&first), [ev("entry", &a), ev("entry", &b), ev("entry", &c3)]);
    // Two deletes while connected, each its own event.
    assert_eq!(s.delete(&format!("/v1/items/{a}")).await.0, StatusCode::NO_CONTENT);
    let del_a = c.drain(QUIET).await;
    assert_eq!(kinds_and_items(&del_a), [ev("delete", &a)]);
    assert_eq!(s.delete(&format!("/v1/items/{b}")).await.0, StatusCode::NO_CONTENT);
    let del_b = c.drain(QUIET).await;
    assert_eq!(kinds_and_items(&del_b), [ev("delete", &b)]);
    drop(c);
    // Away: a delete and a post.
    assert_eq!(s.delete(&format!("/v1/items/{c3}")).await.0, StatusCode::NO_CONTENT);
    let d = s.post_item(3, json!({})).await;

    // Back with the last id (a delete's): exactly what was missed.
    let mut c = Client::connect(&s, 1, Some(&del_b[0].id)).await;
    let missed = c.drain(QUIET).await;
    assert_eq!(kinds_and_items(&missed), [ev("delete", &c3), ev("entry", &d)], "{missed:?}");
    drop(c);
    // A client that lost the last delete resumes from the one before it:
    // that delete is not sent again, the lost one is.
    let mut c = Client::connect(&s, 1, Some(&del_a[0].id)).await;
    let missed = c.drain(QUIET).await;
    assert_eq!(kinds_and_items(&missed), [ev("delete", &b), ev("delete", &c3), ev("entry", &d)], "{missed:?}");
    drop(c);
    // And from the last entry received before them: every delete since.
    let mut c = Client::connect(&s, 1, Some(&first[2].id)).await;
    let missed = c.drain(QUIET).await;
    assert_eq!(
        kinds_and_items(&missed),
        [ev("delete", &a), ev("delete", &b), ev("delete", &c3), ev("entry", &d)],
        "{missed:?}"
    );
    // What a client holds after any of these is the top of the page.
    let mut held = Vec::new();
    for events in [&first, &del_a, &del_b] {
        apply(&mut held, events);
    }
    let mut c2 = Client::connect(&s, 1, Some(&del_b[0].id)).await;
    let last = c2.drain(QUIET).await;
    apply(&mut held, &last);
    assert_eq!(held, std::slice::from_ref(&d));
    let (top, _) = s.home_ids(1, "").await;
    assert_eq!(held, top);
    drop(c2);

    // Each resumed stream goes on from there: a delete while connected,
    // then a resume from that delete's id has nothing more to say.
    let e = s.post_item(2, json!({})).await;
    let got = c.drain(QUIET).await;
    assert_eq!(kinds_and_items(&got), [ev("entry", &e)]);
    assert_eq!(s.delete(&format!("/v1/items/{d}")).await.0, StatusCode::NO_CONTENT);
    let del_d = c.drain(QUIET).await;
    assert_eq!(kinds_and_items(&del_d), [ev("delete", &d)]);
    drop(c);
    let mut c = Client::connect(&s, 1, Some(&del_d[0].id)).await;
    assert_eq!(c.drain(QUIET).await, Vec::<Sse>::new(), "nothing received before is sent again");
    drop(c);
    s.stop().await;
}

#[tokio::test]
async fn an_entry_event_is_the_entry_the_home_page_shows_cursor_included() {
    // Author 3 is hot (2 followers): their posts are pulled, not pushed.
    let s = spawn_with(|c| c.fanout.hot_followers = 2).await;
    for (u, t) in [(1, 2), (1, 3), (4, 3)] {
        s.follow(u, t).await;
    }
    let before = s.post_item(2, json!({})).await;
    s.drained().await;
    let mut c = Client::connect(&s, 1, None).await;
    let original = s.post_item(5, json!({"body": {"t": "an original"}})).await;
    // Pushed and pulled posts, and a repost (its original, with sources).
    let steps = [(2, json!({"body": {"n": 1}})), (3, json!({"body": {"n": 2}})), (2, json!({"repost_of": original}))];
    for (author, body) in steps {
        let posted = s.post_item(author, body.clone()).await;
        let got = c.take(1, Duration::from_secs(5)).await.remove(0);
        s.drained().await;
        let (_, page) = s.get("/v1/users/1/home").await;
        let top = &page["entries"][0];
        assert_eq!(got.event, "entry");
        let shown = if body.get("repost_of").is_some() { &original } else { &posted };
        assert_eq!(top["item"]["id"], json!(shown), "{page}");
        assert_eq!(got.data, *top, "the entry exactly as the page shows it");
        assert_eq!(got.id, top["cursor"].as_str().expect("cursor"), "its id is the page's cursor");
    }
    // Two at once: each as the page shows it (its rank from the top).
    let (x, y) = (s.post_item(2, json!({})).await, s.post_item(3, json!({})).await);
    let got = c.take(2, Duration::from_secs(5)).await;
    s.drained().await;
    let (_, page) = s.get("/v1/users/1/home").await;
    assert_eq!(page["entries"][0]["item"]["id"], json!(y));
    assert_eq!(page["entries"][1]["item"]["id"], json!(x));
    assert_eq!([got[1].data.clone(), got[0].data.clone()], [page["entries"][0].clone(), page["entries"][1].clone()]);
    assert_eq!(c.drain(QUIET).await, Vec::<Sse>::new());
    // The page's bottom is where the stream started.
    let entries = page["entries"].as_array().expect("entries");
    assert_eq!(entries.last().expect("an entry")["item"]["id"], json!(before));
    drop(c);
    s.stop().await;
}

#[tokio::test]
async fn shutdown_ends_open_streams_within_the_grace() {
    let s = spawn_with(|c| c.server.shutdown_grace = tideway_config::HumanDuration(Duration::from_millis(300))).await;
    s.follow(1, 2).await;
    let mut streams = Vec::new();
    for u in [1, 3] {
        streams.push(Client::connect(&s, u, None).await);
    }
    let started = std::time::Instant::now();
    s.stop().await;
    assert!(started.elapsed() < Duration::from_secs(3), "stopped in {:?}", started.elapsed());
    for mut c in streams {
        // Ended, not waiting: `next` gives up at once, well before its 5 s.
        let t = std::time::Instant::now();
        assert!(c.next(Duration::from_secs(5)).await.is_none());
        assert!(t.elapsed() < Duration::from_secs(1), "the stream was still open after the shutdown");
    }
}
