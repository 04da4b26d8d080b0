//! The `jobs_leases` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Jobs`: claims with leases, takeover after expiry, progress only from the
/// holder, checkpoints that never move back, completion.
pub async fn jobs_leases(b: &dyn Backend) {
    use tideway_store::rules::worker_id;
    // Two nodes' workers, and a later run of A's node.
    const A: u64 = worker_id(1, 1);
    const B: u64 = worker_id(2, 1);
    const A2: u64 = worker_id(1, 2);
    for id in [2001, 2002, 2003] {
        created(b, id, 7, true).await;
    }
    created(b, 2004, 7, false).await; // no job without fan-out
    let keys = |jobs: Vec<tideway_store::Job>| jobs.iter().map(|j| j.key).collect::<Vec<_>>();
    assert_eq!(keys(b.pending_jobs(10).await.expect("pending")), vec![2001, 2002, 2003], "oldest first");

    assert_eq!(keys(b.claim_jobs(A, Millis(1000), 100, 2).await.expect("claim")), vec![2001, 2002]);
    // Reading the next jobs ahead is a hint: it claims nothing.
    b.prepare_jobs(Millis(1000), 10).await.expect("prepare");
    assert_eq!(keys(b.claim_jobs(B, Millis(1050), 100, 10).await.expect("claim")), vec![2003], "A's leases are live");
    assert_eq!(
        keys(b.claim_jobs(A, Millis(1080), 100, 10).await.expect("renew")),
        vec![2001, 2002],
        "A renews its own"
    );
    // A's leases end at 1180, B's at 1150: at 1300 B takes everything.
    assert_eq!(keys(b.claim_jobs(B, Millis(1300), 100, 10).await.expect("takeover")), vec![2001, 2002, 2003]);

    let at = |ms: i64, u: u64| (Millis(ms), UserId(u));
    assert_eq!(
        b.advance(A, &[JobProgress::Checkpoint(2001, at(5, 3))]).await.expect("advance"),
        vec![false],
        "A lost it"
    );
    assert_eq!(b.advance(B, &[JobProgress::Checkpoint(2001, at(7, 4))]).await.expect("advance"), vec![true]);
    assert_eq!(
        b.advance(B, &[JobProgress::Checkpoint(2001, at(6, 9)), JobProgress::Checkpoint(2001, at(7, 4))])
            .await
            .expect("advance"),
        vec![false, false],
        "a checkpoint never moves back, nor stays in place"
    );
    let job = b.pending_jobs(10).await.expect("pending").into_iter().find(|j| j.key == 2001).expect("job 2001");
    assert_eq!(job.cursor, Some(at(7, 4)));

    assert_eq!(
        b.advance(B, &[JobProgress::Complete(2002), JobProgress::Complete(9999)]).await.expect("complete"),
        vec![true, false],
        "an unknown job is not recorded"
    );
    assert_eq!(b.advance(A, &[JobProgress::Complete(2002)]).await.expect("complete again"), vec![false], "gone");
    assert_eq!(keys(b.pending_jobs(10).await.expect("pending")), vec![2001, 2003]);
    // After B's leases end, A may take the rest and finish them.
    assert_eq!(keys(b.claim_jobs(A, Millis(2000), 100, 10).await.expect("claim")), vec![2001, 2003]);
    let done = b.advance(A, &[JobProgress::Complete(2001), JobProgress::Complete(2003)]).await.expect("complete");
    assert_eq!(done, vec![true, true]);
    assert!(b.pending_jobs(10).await.expect("pending").is_empty());

    // A restarted node (a later epoch of A's id) takes back what its dead
    // run holds at once, live lease or not; another node does not.
    for id in [2005, 2006] {
        created(b, id, 7, true).await;
    }
    assert_eq!(keys(b.claim_jobs(A, Millis(3000), 10_000, 1).await.expect("claim")), vec![2005]);
    assert_eq!(keys(b.claim_jobs(B, Millis(3001), 10_000, 10).await.expect("claim")), vec![2006], "A's lease is live");
    assert_eq!(
        keys(b.claim_jobs(A2, Millis(3002), 10_000, 10).await.expect("claim")),
        vec![2005],
        "A's later run takes A's job at once, not B's"
    );
    assert_eq!(
        b.advance(A, &[JobProgress::Complete(2005)]).await.expect("advance"),
        vec![false],
        "the earlier run's progress is not recorded"
    );
    assert_eq!(
        keys(b.claim_jobs(A, Millis(3003), 10_000, 10).await.expect("claim")),
        Vec::<u64>::new(),
        "nor may it take back"
    );
    assert_eq!(b.advance(A2, &[JobProgress::Complete(2005)]).await.expect("advance"), vec![true]);
    assert_eq!(b.advance(B, &[JobProgress::Complete(2006)]).await.expect("advance"), vec![true]);
}
