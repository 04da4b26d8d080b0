//! Items: what can appear in a feed, their kinds and visibility, and the
//! validation of a new item against the documented limits.

use crate::error::DomainError;
use crate::ids::{ItemId, UserId};
use crate::limits::*;
use crate::time::Millis;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// What an item is. `user` (a recommendation card) and `ad` are *cards*: they
/// reach a home only by direct insertion or promotion, never by authorship.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ItemKind {
    Post,
    Repost,
    Reply,
    User,
    Ad,
    /// An app-defined kind, written `x-<name>`.
    App(String),
}

impl ItemKind {
    /// The kind of a new item: `given`, else inferred (`repost` with a
    /// `repost_of`, `reply` with a `reply_to`, else `post`).
    pub fn resolve(
        given: Option<&str>,
        repost_of: Option<ItemId>,
        reply_to: Option<ItemId>,
    ) -> Result<Self, DomainError> {
        Ok(match given {
            Some(k) => Self::parse(k)?,
            None if repost_of.is_some() => Self::Repost,
            None if reply_to.is_some() => Self::Reply,
            None => Self::Post,
        })
    }

    pub fn parse(s: &str) -> Result<Self, DomainError> {
        Ok(match s {
            "post" => Self::Post,
            "repost" => Self::Repost,
            "reply" => Self::Reply,
            "user" => Self::User,
            "ad" => Self::Ad,
            other => match other.strip_prefix("x-") {
                Some(name)
                    if !name.is_empty()
                        && name.len() <= 32
                        && name
                            .bytes()
                            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-') =>
                {
                    Self::App(name.to_owned())
                }
                _ => {
                    return Err(DomainError::invalid(
                        "kind",
                        format!(
                            "{s:?} is not one of post, repost, reply, user, ad or x-<name> (name: [a-z0-9_-]{{1,32}})"
                        ),
                    ));
                }
            },
        })
    }

    pub fn as_string(&self) -> String {
        match self {
            Self::Post => "post".into(),
            Self::Repost => "repost".into(),
            Self::Reply => "reply".into(),
            Self::User => "user".into(),
            Self::Ad => "ad".into(),
            Self::App(n) => format!("x-{n}"),
        }
    }

    /// Cards reach homes only by insertion or promotion.
    pub fn is_card(&self) -> bool {
        matches!(self, Self::User | Self::Ad)
    }
}

impl Serialize for ItemKind {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.as_string())
    }
}

impl<'de> Deserialize<'de> for ItemKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        ItemKind::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Who may see an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Visibility {
    Public,
    Followers,
    Mentioned,
}

impl Visibility {
    pub fn parse(s: &str) -> Result<Self, DomainError> {
        match s {
            "public" => Ok(Self::Public),
            "followers" => Ok(Self::Followers),
            "mentioned" => Ok(Self::Mentioned),
            _ => Err(DomainError::invalid("visibility", format!("{s:?} is not one of public, followers, mentioned"))),
        }
    }
}

/// A reference to an app object (a book, a stock, a job…).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ObjectRef {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
}

pub use crate::body::Body;

/// A stored item. `created_at` is the time encoded in `id`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Item {
    pub id: ItemId,
    pub author: UserId,
    pub kind: ItemKind,
    /// Shared: pages hand it to the serializer without copying it.
    pub body: Body,
    pub visibility: Visibility,
    pub tags: Vec<String>,
    pub mentions: Vec<UserId>,
    pub object: Option<ObjectRef>,
    pub repost_of: Option<ItemId>,
    pub reply_to: Option<ItemId>,
    /// The author of the item replied to, fixed at creation so the home rule
    /// for replies holds even after that item is deleted.
    pub reply_to_author: Option<UserId>,
    pub idempotency_key: Option<String>,
    pub deleted: bool,
    /// How many times the item was changed (patched or deleted) since it was
    /// created: a node that keeps a copy of the item checks it against the
    /// store's before showing it. Absent from stored records while 0.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub rev: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl Item {
    /// A public item with an empty body and nothing else set (tests,
    /// benchmarks and backends' fixtures build on it).
    pub fn new(id: ItemId, author: UserId, kind: ItemKind) -> Self {
        Item {
            id,
            author,
            kind,
            body: Body::default(),
            visibility: Visibility::Public,
            tags: vec![],
            mentions: vec![],
            object: None,
            repost_of: None,
            reply_to: None,
            reply_to_author: None,
            idempotency_key: None,
            deleted: false,
            rev: 0,
        }
    }

    pub fn created_at(&self) -> Millis {
        self.id.created_at()
    }

    /// The heap memory this item holds beside its own struct, body
    /// included, each allocation counted as the allocator sizes it (an
    /// estimate the caches weigh items by; a test checks it against the
    /// allocations themselves).
    pub fn heap_bytes(&self) -> usize {
        let text = |s: &String| if s.capacity() == 0 { 0 } else { crate::body::allocated(s.capacity()) };
        let kind = match &self.kind {
            ItemKind::App(name) => text(name),
            _ => 0,
        };
        let vec = |bytes: usize| if bytes == 0 { 0 } else { crate::body::allocated(bytes) };
        let tags =
            vec(self.tags.capacity() * std::mem::size_of::<String>()) + self.tags.iter().map(text).sum::<usize>();
        let mentions = vec(self.mentions.capacity() * std::mem::size_of::<UserId>());
        let object = self.object.as_ref().map_or(0, |o| text(&o.kind) + text(&o.id));
        let idem = self.idempotency_key.as_ref().map_or(0, text);
        kind + tags + mentions + object + idem + self.body.heap_bytes()
    }

    pub fn mentions_user(&self, u: UserId) -> bool {
        self.mentions.contains(&u)
    }

    /// `visible(i, v)` of the spec. `viewer_follows_author` is the current
    /// follow edge `viewer -> author`; `None` viewer sees public items only.
    pub fn visible_to(&self, viewer: Option<UserId>, viewer_follows_author: bool) -> bool {
        if self.deleted {
            return false;
        }
        match (self.visibility, viewer) {
            (Visibility::Public, _) => true,
            (_, None) => false,
            (Visibility::Followers, Some(v)) => v == self.author || viewer_follows_author || self.mentions_user(v),
            (Visibility::Mentioned, Some(v)) => v == self.author || self.mentions_user(v),
        }
    }
}

/// A validated request to create an item (ids already parsed).
#[derive(Debug, Clone, PartialEq)]
pub struct NewItem {
    pub author: UserId,
    pub kind: ItemKind,
    pub body: Body,
    pub visibility: Visibility,
    pub tags: Vec<String>,
    pub mentions: Vec<UserId>,
    pub object: Option<ObjectRef>,
    pub repost_of: Option<ItemId>,
    pub reply_to: Option<ItemId>,
    pub created_at: Option<Millis>,
    pub idempotency_key: Option<String>,
}

/// Checks a body against the size limit.
pub fn check_body(body: &Body) -> Result<(), DomainError> {
    let size = body.len();
    if size > MAX_BODY_BYTES {
        return Err(DomainError::TooLarge { size, limit: MAX_BODY_BYTES });
    }
    Ok(())
}

/// A tag as stored: lowercased, 1..=`MAX_TAG_LEN` bytes of letters,
/// digits, `_` or `-` (`field` names it in the error).
fn normalize_tag(field: &'static str, t: &str) -> Result<String, DomainError> {
    let t = t.to_lowercase();
    if t.is_empty() || t.len() > MAX_TAG_LEN || !t.chars().all(|c| c.is_alphanumeric() || c == '_' || c == '-') {
        return Err(DomainError::invalid(
            field,
            format!("{t:?} must be 1..={MAX_TAG_LEN} bytes of letters, digits, '_' or '-'"),
        ));
    }
    Ok(t)
}

/// Checks an object reference: a short lowercase type and a printable id.
pub fn check_object(o: &ObjectRef) -> Result<(), DomainError> {
    let type_ok = !o.kind.is_empty()
        && o.kind.len() <= MAX_OBJECT_TYPE_LEN
        && o.kind.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-');
    if !type_ok {
        return Err(DomainError::invalid("object.type", format!("must match [a-z0-9_-]{{1,{MAX_OBJECT_TYPE_LEN}}}")));
    }
    if o.id.is_empty() || o.id.len() > MAX_OBJECT_ID_LEN || o.id.chars().any(|c| c.is_control() || c == '/') {
        return Err(DomainError::invalid(
            "object.id",
            format!("must be 1..={MAX_OBJECT_ID_LEN} printable bytes without '/'"),
        ));
    }
    Ok(())
}

/// Checks a tag given in a path (a feed's name), returning its normal form.
pub fn parse_tag(t: &str) -> Result<String, DomainError> {
    normalize_tag("tag", t)
}

impl NewItem {
    /// A request with the API's defaults: empty body, public, no tags,
    /// mentions, object or links, created now, no idempotency key.
    pub fn new(author: UserId, kind: ItemKind) -> Self {
        NewItem {
            author,
            kind,
            body: Body::default(),
            visibility: Visibility::Public,
            tags: vec![],
            mentions: vec![],
            object: None,
            repost_of: None,
            reply_to: None,
            created_at: None,
            idempotency_key: None,
        }
    }

    /// Checks every limit and the consistency of kind with `repost_of` /
    /// `reply_to`; normalises tags (lowercase, deduplicated, in order) and
    /// mentions (deduplicated, in order).
    pub fn validated(mut self) -> Result<Self, DomainError> {
        check_body(&self.body)?;
        if self.tags.len() > MAX_TAGS {
            return Err(DomainError::invalid("tags", format!("at most {MAX_TAGS} tags")));
        }
        let mut tags: Vec<String> = Vec::with_capacity(self.tags.len());
        for t in &self.tags {
            let t = normalize_tag("tags", t)?;
            if !tags.contains(&t) {
                tags.push(t);
            }
        }
        self.tags = tags;
        if self.mentions.len() > MAX_MENTIONS {
            return Err(DomainError::invalid("mentions", format!("at most {MAX_MENTIONS} users")));
        }
        let mut mentions = Vec::with_capacity(self.mentions.len());
        for m in &self.mentions {
            if !mentions.contains(m) {
                mentions.push(*m);
            }
        }
        self.mentions = mentions;
        if let Some(o) = &self.object {
            check_object(o)?;
        }
        if let Some(k) = &self.idempotency_key
            && (k.is_empty() || k.len() > MAX_IDEMPOTENCY_KEY_LEN)
        {
            return Err(DomainError::invalid(
                "idempotency_key",
                format!("must be 1..={MAX_IDEMPOTENCY_KEY_LEN} bytes"),
            ));
        }
        match (&self.kind, self.repost_of, self.reply_to) {
            (_, Some(_), Some(_)) => {
                return Err(DomainError::invalid("repost_of", "an item cannot be both a repost and a reply"));
            }
            (ItemKind::Repost, None, _) => return Err(DomainError::invalid("repost_of", "a repost needs repost_of")),
            (ItemKind::Reply, _, None) => return Err(DomainError::invalid("reply_to", "a reply needs reply_to")),
            (k, Some(_), _) if *k != ItemKind::Repost => {
                return Err(DomainError::invalid("kind", "an item with repost_of must be of kind repost"));
            }
            (k, _, Some(_)) if *k != ItemKind::Reply => {
                return Err(DomainError::invalid("kind", "an item with reply_to must be of kind reply"));
            }
            _ => {}
        }
        if self.kind == ItemKind::Repost && self.visibility != Visibility::Public {
            return Err(DomainError::invalid("visibility", "a repost is always public"));
        }
        Ok(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> NewItem {
        NewItem::new(UserId(1), ItemKind::Post)
    }

    #[test]
    fn kinds_round_trip_and_reject_unknown() {
        for k in ["post", "repost", "reply", "user", "ad", "x-book_review"] {
            assert_eq!(ItemKind::parse(k).expect(k).as_string(), k);
        }
        for bad in ["", "Post", "x-", "x-Caps", "story", "x-a/b"] {
            assert!(ItemKind::parse(bad).is_err(), "{bad:?}");
        }
        assert!(ItemKind::User.is_card() && ItemKind::Ad.is_card() && !ItemKind::Post.is_card());
    }

    #[test]
    fn tags_are_normalised_and_limited() {
        let mut n = base();
        n.tags = vec!["Rust".into(), "rust".into(), "tokio".into()];
        assert_eq!(n.validated().expect("ok").tags, vec!["rust", "tokio"]);
        let mut n = base();
        n.tags = vec!["has space".into()];
        assert!(n.validated().is_err());
        let mut n = base();
        n.tags = (0..=MAX_TAGS).map(|i| format!("t{i}")).collect();
        assert!(n.validated().is_err());
    }

    #[test]
    fn body_limit_is_enforced() {
        let mut n = base();
        let mut big = serde_json::Map::new();
        big.insert("text".into(), serde_json::Value::String("x".repeat(MAX_BODY_BYTES)));
        n.body = Body::new(&big);
        assert!(matches!(n.validated(), Err(DomainError::TooLarge { .. })));
    }

    #[test]
    fn kind_must_agree_with_links() {
        let mut n = base();
        n.repost_of = Some(ItemId(5));
        assert!(n.clone().validated().is_err(), "post with repost_of");
        n.kind = ItemKind::Repost;
        assert!(n.clone().validated().is_ok());
        n.visibility = Visibility::Followers;
        assert!(n.validated().is_err(), "non-public repost");
        let mut n = base();
        n.kind = ItemKind::Reply;
        assert!(n.validated().is_err(), "reply without reply_to");
    }

    #[test]
    fn visibility_rules() {
        let item = Item {
            id: ItemId(1),
            author: UserId(1),
            kind: ItemKind::Post,
            body: Body::default(),
            visibility: Visibility::Followers,
            tags: vec![],
            mentions: vec![UserId(3)],
            object: None,
            repost_of: None,
            reply_to: None,
            reply_to_author: None,
            idempotency_key: None,
            deleted: false,
            rev: 0,
        };
        assert!(item.visible_to(Some(UserId(1)), false));
        assert!(item.visible_to(Some(UserId(2)), true));
        assert!(!item.visible_to(Some(UserId(2)), false));
        assert!(item.visible_to(Some(UserId(3)), false));
        assert!(!item.visible_to(None, false));
        let mut m = item.clone();
        m.visibility = Visibility::Mentioned;
        assert!(!m.visible_to(Some(UserId(2)), true));
        assert!(m.visible_to(Some(UserId(3)), false));
        let mut d = item;
        d.visibility = Visibility::Public;
        assert!(d.visible_to(None, false));
        d.deleted = true;
        assert!(!d.visible_to(Some(UserId(1)), true));
    }
}
