//! The feeds an item is posted to besides home and profile: the mentions of
//! each user it mentions, the feed of each of its tags, and the feed of its
//! object. An item is posted once, in its own write, under each feed's
//! [`PostingFeed::id`]; pages re-check every posting against the item as it
//! is now ([`PostingFeed::shows`]), so a later delete, visibility change,
//! block or mute is right on the next read without touching the postings.
//!
//! - **mentions(u)**: items that mention `u`, `visible(i, u)`, not
//!   `hidden(author, u)` (mutes apply).
//! - **tag(t)**, **object(type, id)**: public items with that tag (stored
//!   lowercased) or object, not `hidden(author, v)` for a viewer `v` (mutes
//!   apply).
//!
//! A repost is not posted: it shows its original, which has its postings.

use crate::cursor::FeedScope;
use crate::entry::Relation;
use crate::error::DomainError;
use crate::ids::UserId;
use crate::item::{Item, ItemKind, ObjectRef, Visibility, check_object, parse_tag};

/// A feed of postings.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum PostingFeed {
    Mentions(UserId),
    Tag(String),
    Object { kind: String, id: String },
}

impl PostingFeed {
    /// The feed of a tag as asked (matched lowercased, as stored): 400 for
    /// one no item could carry.
    pub fn tag(t: &str) -> Result<Self, DomainError> {
        Ok(PostingFeed::Tag(parse_tag(t)?))
    }

    /// The feed of an object (its type and id checked as an item's are).
    pub fn object(kind: &str, id: &str) -> Result<Self, DomainError> {
        let o = ObjectRef { kind: kind.to_owned(), id: id.to_owned() };
        check_object(&o)?;
        Ok(PostingFeed::Object { kind: o.kind, id: o.id })
    }

    /// The feed of its cursors.
    pub fn scope(&self) -> FeedScope<'_> {
        match self {
            PostingFeed::Mentions(u) => FeedScope::Mentions(u.0),
            PostingFeed::Tag(t) => FeedScope::Tag(t),
            PostingFeed::Object { kind, id } => FeedScope::Object(kind, id),
        }
    }

    /// The stable name postings are stored under (the fingerprint its
    /// cursors carry). Two feeds may share one: pages check membership.
    pub fn id(&self) -> u64 {
        self.scope().fingerprint()
    }

    /// The feeds `item` is posted to (none for a repost), in a fixed order.
    pub fn of(item: &Item) -> Vec<PostingFeed> {
        if item.kind == ItemKind::Repost {
            return Vec::new();
        }
        let mut feeds: Vec<PostingFeed> = item.mentions.iter().map(|u| PostingFeed::Mentions(*u)).collect();
        feeds.extend(item.tags.iter().map(|t| PostingFeed::Tag(t.clone())));
        if let Some(o) = &item.object {
            feeds.push(PostingFeed::Object { kind: o.kind.clone(), id: o.id.clone() });
        }
        feeds
    }

    /// Whether `item` belongs to this feed (its own fields, as stored).
    pub fn holds(&self, item: &Item) -> bool {
        item.kind != ItemKind::Repost
            && match self {
                PostingFeed::Mentions(u) => item.mentions_user(*u),
                PostingFeed::Tag(t) => item.tags.iter().any(|x| x == t),
                PostingFeed::Object { kind, id } => {
                    item.object.as_ref().is_some_and(|o| &o.kind == kind && &o.id == id)
                }
            }
    }

    /// Whether a page of this feed shows `item` to `viewer` (for mentions,
    /// the mentioned user is the viewer), `rel` being the viewer's relation
    /// to the item's author (`viewer_follows_author` is `rel.following`).
    pub fn shows(&self, item: &Item, viewer: Option<UserId>, rel: Relation) -> bool {
        if item.deleted || !self.holds(item) {
            return false;
        }
        match self {
            PostingFeed::Mentions(u) => item.visible_to(Some(*u), rel.following) && !rel.hidden(true),
            PostingFeed::Tag(_) | PostingFeed::Object { .. } => {
                item.visibility == Visibility::Public && (viewer.is_none() || !rel.hidden(true))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::ItemId;

    fn item(kind: ItemKind) -> Item {
        Item {
            id: ItemId(10),
            author: UserId(1),
            kind,
            body: crate::Body::default(),
            visibility: Visibility::Public,
            tags: vec!["rust".into(), "db".into()],
            mentions: vec![UserId(7)],
            object: Some(ObjectRef { kind: "book".into(), id: "1".into() }),
            repost_of: None,
            reply_to: None,
            reply_to_author: None,
            idempotency_key: None,
            deleted: false,
            rev: 0,
        }
    }

    #[test]
    fn an_item_is_posted_to_its_mentions_tags_and_object() {
        let i = item(ItemKind::Post);
        let feeds = PostingFeed::of(&i);
        assert_eq!(
            feeds,
            vec![
                PostingFeed::Mentions(UserId(7)),
                PostingFeed::Tag("rust".into()),
                PostingFeed::Tag("db".into()),
                PostingFeed::Object { kind: "book".into(), id: "1".into() },
            ]
        );
        assert!(feeds.iter().all(|f| f.holds(&i)));
        assert!(PostingFeed::of(&item(ItemKind::Repost)).is_empty(), "a repost shows its original");
        // Ids are stable names, distinct per feed.
        assert_eq!(PostingFeed::Tag("rust".into()).id(), PostingFeed::Tag("rust".into()).id());
        assert_ne!(PostingFeed::Tag("rust".into()).id(), PostingFeed::Tag("db".into()).id());
        assert_ne!(PostingFeed::Mentions(UserId(7)).id(), PostingFeed::Mentions(UserId(8)).id());
        assert!(!PostingFeed::Tag("go".into()).holds(&i), "an id collision is caught by membership");
    }

    #[test]
    fn pages_apply_visibility_blocks_and_mutes_as_the_item_is_now() {
        let mut i = item(ItemKind::Post);
        let tag = PostingFeed::Tag("rust".into());
        let me = PostingFeed::Mentions(UserId(7));
        let none = Relation::default();
        assert!(tag.shows(&i, None, none) && me.shows(&i, Some(UserId(7)), none));
        let muted = Relation { muting: true, ..none };
        assert!(!tag.shows(&i, Some(UserId(7)), muted) && !me.shows(&i, Some(UserId(7)), muted));
        assert!(tag.shows(&i, None, muted), "no viewer: nothing hidden");
        i.visibility = Visibility::Mentioned;
        assert!(!tag.shows(&i, None, none), "tag feeds are public items only");
        assert!(me.shows(&i, Some(UserId(7)), none), "the mentioned user sees it");
        i.visibility = Visibility::Followers;
        assert!(me.shows(&i, Some(UserId(7)), none), "mentioned, so visible");
        i.deleted = true;
        assert!(!me.shows(&i, Some(UserId(7)), none));
    }
}
