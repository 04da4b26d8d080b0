//! The `snapshots` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Snapshots`: bytes kept under an id, read back whole, gone after their
/// time to live; an unknown id is `None`.
pub async fn snapshots(b: &dyn Backend) {
    let bytes: Vec<u8> = (0..=255u8).cycle().take(9 * 300).collect();
    b.put_snapshot(91, &bytes, 60_000).await.expect("put");
    b.put_snapshot(92, &[], 60_000).await.expect("put an empty one");
    b.put_snapshot(93, &[1, 2, 3], 50).await.expect("put a short-lived one");
    assert_eq!(b.snapshot(91).await.expect("get"), Some(bytes));
    assert_eq!(b.snapshot(92).await.expect("get empty"), Some(vec![]));
    assert_eq!(b.snapshot(94).await.expect("unknown"), None);
    tokio::time::sleep(std::time::Duration::from_millis(120)).await;
    assert_eq!(b.snapshot(93).await.expect("expired"), None, "gone after its time to live");
}
