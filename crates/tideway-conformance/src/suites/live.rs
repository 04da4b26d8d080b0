//! The `live` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Live`: sessions stored whole, steps decided by `Session::moved` (a
/// wrong one changes nothing and says where the session is), the limit of
/// open sessions per anchor, open sessions of many anchors in one call,
/// ended ones merged by (end, id) below a position; two racing starts of
/// one session make one.
pub async fn live(b: &dyn Backend) {
    use tideway_core::live::{Move, Phase, Session};
    use tideway_store::Moved;
    let mut body = serde_json::Map::new();
    body.insert("title".into(), serde_json::json!("Friday night"));
    let body = tideway_core::Body::new(&body);
    let new = |id: u64, anchor: u64, at: i64| Session::new(id, UserId(anchor), Millis(at), body.clone());
    let ids = |v: &[Session]| {
        let mut v: Vec<u64> = v.iter().map(|s| s.id).collect();
        v.sort_unstable();
        v
    };

    assert!(b.create_session(new(7001, 1, 500), 3).await.expect("create"));
    assert_eq!(b.sessions(&[7001, 7999]).await.expect("sessions"), vec![Some(new(7001, 1, 500)), None]);
    assert_eq!(b.move_session(7999, Move::Start, Millis(10)).await.expect("unknown"), Moved::Unknown);
    match b.move_session(7001, Move::End, Millis(10)).await.expect("end an upcoming one") {
        Moved::Wrong(s) => assert_eq!(s.phase(), Phase::Upcoming),
        other => panic!("ending an upcoming session: {other:?}"),
    }
    let started = match b.move_session(7001, Move::Start, Millis(600)).await.expect("start") {
        Moved::Done(s) => s,
        other => panic!("start: {other:?}"),
    };
    assert_eq!((started.phase(), started.started_at, &started.body), (Phase::Live, Some(Millis(600)), &body));
    assert!(matches!(b.move_session(7001, Move::Start, Millis(601)).await.expect("again"), Moved::Wrong(_)));
    assert_eq!(b.sessions(&[7001]).await.expect("read").pop().flatten(), Some(started.clone()));

    // At most 3 open per anchor (live counts; ended ones do not).
    assert!(b.create_session(new(7002, 1, 700), 3).await.expect("second"));
    assert!(b.create_session(new(7003, 1, 800), 3).await.expect("third"));
    assert!(!b.create_session(new(7004, 1, 900), 3).await.expect("fourth"), "over the limit");
    assert_eq!(b.sessions(&[7004]).await.expect("read").pop().flatten(), None, "nothing stored");
    match b.move_session(7001, Move::End, Millis(650)).await.expect("end") {
        Moved::Done(s) => assert_eq!((s.phase(), s.ended_at), (Phase::Replay, Some(Millis(650)))),
        other => panic!("end: {other:?}"),
    }
    assert!(b.create_session(new(7004, 1, 900), 3).await.expect("room again"));

    // Anchors 2 and 3: ended sessions at 100..; anchor 4 has none.
    for (id, anchor, end) in [(7010, 2, 100), (7011, 3, 100), (7012, 2, 300), (7013, 3, 200), (7014, 2, 50)] {
        assert!(b.create_session(new(id, anchor, 1), 10).await.expect("create"));
        assert!(matches!(b.move_session(id, Move::Start, Millis(end - 10)).await.expect("start"), Moved::Done(_)));
        assert!(matches!(b.move_session(id, Move::End, Millis(end)).await.expect("end"), Moved::Done(_)));
    }
    assert!(b.create_session(new(7020, 3, 5000), 10).await.expect("upcoming of 3"));
    let anchors = [UserId(1), UserId(2), UserId(3), UserId(4)];
    assert_eq!(ids(&b.open_sessions(&anchors).await.expect("open")), vec![7002, 7003, 7004, 7020]);
    assert!(b.open_sessions(&[UserId(4)]).await.expect("none").is_empty());
    let ended = b.ended_sessions(&anchors, (Millis(i64::MAX), 0), 10).await.expect("ended");
    assert_eq!(ended.iter().map(|s| s.id).collect::<Vec<_>>(), vec![7001, 7012, 7013, 7011, 7010, 7014]);
    assert_eq!(ended[0].ended_at, Some(Millis(650)));
    let below = b.ended_sessions(&anchors, (Millis(100), 7011), 2).await.expect("below");
    assert_eq!(below.iter().map(|s| s.id).collect::<Vec<_>>(), vec![7010, 7014], "(end, id) strictly below");
    let of_two = b.ended_sessions(&[UserId(2)], (Millis(300), 7012), 10).await.expect("one anchor");
    assert_eq!(of_two.iter().map(|s| s.id).collect::<Vec<_>>(), vec![7010, 7014]);
    assert!(b.ended_sessions(&[], (Millis(i64::MAX), 0), 10).await.expect("no anchors").is_empty());

    // Two starts of one session at once: one wins.
    assert!(b.create_session(new(7030, 5, 1), 10).await.expect("create"));
    let (x, y) =
        tokio::join!(b.move_session(7030, Move::Start, Millis(20)), b.move_session(7030, Move::Start, Millis(21)));
    let done = [x.expect("x"), y.expect("y")].iter().filter(|m| matches!(m, Moved::Done(_))).count();
    assert_eq!(done, 1, "exactly one start succeeds");
}
