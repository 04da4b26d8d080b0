//! The `activity` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Activity`: last reads that never move back, batch reads in order, the
/// inactive set, export and import.
pub async fn activity(b: &dyn Backend) {
    let (u1, u2, u3) = (UserId(1), UserId(2), UserId(3));
    b.touch(u1, Millis(100)).await.expect("touch");
    b.touch(u1, Millis(50)).await.expect("touch");
    b.touch(u2, Millis(200)).await.expect("touch");
    assert_eq!(b.last_active(&[u2, u3, u1]).await.expect("last"), vec![Some(Millis(200)), None, Some(Millis(100))]);
    assert_eq!(b.inactive_before(Millis(101)).await.expect("inactive"), vec![u1]);
    assert!(b.inactive_before(Millis(100)).await.expect("inactive").is_empty(), "the cutoff is exclusive");
    assert_eq!(b.export_activity().await.expect("export"), vec![(u1, Millis(100)), (u2, Millis(200))]);
    b.import_activity(&[(u3, Millis(300)), (u1, Millis(10))]).await.expect("import");
    assert_eq!(
        b.export_activity().await.expect("export"),
        vec![(u1, Millis(100)), (u2, Millis(200)), (u3, Millis(300))],
        "an import never moves a last read back"
    );
}
