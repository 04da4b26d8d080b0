//! The `items_update` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `Items::update_item`: typed patches and soft deletes; none on a deleted
/// or unknown item.
pub async fn items_update(b: &dyn Backend) {
    created(b, 1000, 1, false).await;
    let mut body = serde_json::Map::new();
    body.insert("t".into(), serde_json::json!("edited"));
    let body = tideway_core::Body::new(&body);
    let patched = b
        .update_item(ItemId(1000), &ItemChange::Patch { body: Some(body.clone()), visibility: None })
        .await
        .expect("patch")
        .expect("the item exists");
    assert_eq!((&patched.body, patched.visibility), (&body, Visibility::Public));
    let patched = b
        .update_item(ItemId(1000), &ItemChange::Patch { body: None, visibility: Some(Visibility::Followers) })
        .await
        .expect("patch")
        .expect("the item exists");
    assert_eq!((&patched.body, patched.visibility), (&body, Visibility::Followers), "a patch keeps what it omits");
    let deleted = b.update_item(ItemId(1000), &ItemChange::Delete).await.expect("delete").expect("the item exists");
    assert!(deleted.deleted);
    assert_eq!(b.update_item(ItemId(1000), &ItemChange::Delete).await.expect("delete again"), None, "already deleted");
    assert_eq!(b.update_item(ItemId(4242), &ItemChange::Delete).await.expect("unknown"), None);
    match b.records(&[1000]).await.expect("records").pop().flatten() {
        Some(tideway_store::Record::Item(i)) => assert!(i.deleted, "the tombstone stays readable"),
        other => panic!("the deleted item's record: {other:?}"),
    }
}
