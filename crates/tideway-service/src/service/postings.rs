//! The mention, tag and object feeds (SPEC section 2): pages of postings,
//! each item re-checked as it is now (`PostingFeed::shows`).

use super::feeds::{FeedsService, page_spec};
use crate::error::Result;
use crate::feed::{Evaluator, PostingSource, walk};
use crate::view::{Page, PageRequest};
use tideway_core::{PostingFeed, UserId};

impl FeedsService {
    /// A page of `feed` seen by `viewer` (for mentions: the user mentioned).
    async fn posting_page(&self, feed: &PostingFeed, viewer: Option<UserId>, req: &PageRequest) -> Result<Page> {
        let scope = feed.scope();
        let spec = page_spec(req, &scope)?;
        let backend = self.backend.as_ref();
        let mut source = PostingSource { backend, feed: feed.id(), dir: spec.dir, bound: spec.cursor };
        let eval = Evaluator::Postings { backend, feed, viewer, read_ahead: self.read_ahead };
        let walked = walk(&mut source, &eval, spec.limit).await?;
        self.finish_page(&spec, walked, &scope, viewer, &[]).await
    }

    /// mentions(u): items that mention `user`, visible to them, not from
    /// someone they block, are blocked by or mute.
    pub async fn mentions(&self, user: UserId, req: &PageRequest) -> Result<Page> {
        self.posting_page(&PostingFeed::Mentions(user), Some(user), req).await
    }

    /// tag(t): public items with the tag (matched lowercased), minus authors
    /// hidden from `viewer`.
    pub async fn tag_feed(&self, tag: &str, viewer: Option<UserId>, req: &PageRequest) -> Result<Page> {
        self.posting_page(&PostingFeed::tag(tag)?, viewer, req).await
    }

    /// object(type, id): public items about the object, minus authors hidden
    /// from `viewer`.
    pub async fn object_feed(&self, kind: &str, id: &str, viewer: Option<UserId>, req: &PageRequest) -> Result<Page> {
        self.posting_page(&PostingFeed::object(kind, id)?, viewer, req).await
    }
}
