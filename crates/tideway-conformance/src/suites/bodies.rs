//! The `bodies` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Items::bodies`: a body reads back as written, whether or not the store
/// keeps it in memory; a visibility patch keeps it; a body patch replaces
/// it; unknown items have none.
pub async fn bodies(b: &dyn Backend) {
    let mut body = serde_json::Map::new();
    body.insert("text".into(), serde_json::json!("x".repeat(400)));
    let body = tideway_core::Body::new(&body);
    let item = Item { body: body.clone(), ..Item::new(ItemId(3000), UserId(1), ItemKind::Post) };
    assert!(matches!(b.create_item(item, false, Millis(1)).await.expect("create"), CreateOutcome::Created(_)));
    let got = |ids: Vec<u64>| async move {
        let ids: Vec<ItemId> = ids.into_iter().map(ItemId).collect();
        b.bodies(&ids).await.expect("bodies").into_iter().collect::<Vec<_>>()
    };
    assert_eq!(got(vec![3000, 4242]).await, vec![Some(body.clone()), None]);
    b.update_item(ItemId(3000), &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch")
        .expect("exists");
    assert_eq!(got(vec![3000]).await, vec![Some(body)], "a visibility patch keeps the body");
    let mut other = serde_json::Map::new();
    other.insert("t".into(), serde_json::json!(2));
    let other = tideway_core::Body::new(&other);
    b.update_item(ItemId(3000), &ItemChange::Patch { body: Some(other.clone()), visibility: None })
        .await
        .expect("patch")
        .expect("exists");
    assert_eq!(got(vec![3000]).await, vec![Some(other)]);
}
