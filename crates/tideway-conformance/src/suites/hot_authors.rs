//! The `hot_authors` suite.

#[allow(unused_imports)]
use crate::prelude::*;

/// `HotAuthors`: the newest unpushed key per author, filtered by floor, in
/// the order asked; export and import.
pub async fn hot_authors(b: &dyn Backend) {
    let (a, c, d) = (UserId(10), UserId(20), UserId(30));
    b.mark_unpushed(a, 500).await.expect("mark");
    b.mark_unpushed(a, 400).await.expect("mark");
    b.mark_unpushed(c, 900).await.expect("mark");
    assert_eq!(b.unpushed_above(&[c, d, a], 0).await.expect("above"), vec![c, a], "in the order asked");
    assert_eq!(b.unpushed_above(&[a, c], 499).await.expect("above"), vec![a, c]);
    assert_eq!(b.unpushed_above(&[a, c], 500).await.expect("above"), vec![c], "strictly above the floor");
    assert!(b.unpushed_above(&[], 0).await.expect("above").is_empty());
    let keys = b.unpushed_keys(&[c, d, a]).await.expect("keys");
    assert_eq!(keys, vec![Some(900), None, Some(500)], "each author's newest, in the order asked");
    for floor in [0, 499, 500, 900] {
        assert_eq!(
            tideway_store::unpushed_above_floor(&[c, d, a], &keys, floor),
            b.unpushed_above(&[c, d, a], floor).await.expect("above"),
            "the keys filtered by floor {floor} are what unpushed_above answers"
        );
    }
    assert!(b.unpushed_keys(&[]).await.expect("keys").is_empty());
    assert_eq!(b.export_unpushed().await.expect("export"), vec![(a, 500), (c, 900)]);
    b.import_unpushed(&[(d, 50), (a, 1)]).await.expect("import");
    assert_eq!(b.export_unpushed().await.expect("export"), vec![(a, 500), (c, 900), (d, 50)]);
}
