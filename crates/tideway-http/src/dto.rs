//! JSON shapes of the API (ids as decimal strings, times RFC 3339 UTC ms).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use tideway_core::{ItemId, Millis, ObjectRef, Relation, UserId};
use tideway_service::{EntryView, ItemView, NotificationGroup, NotificationsPage, Page, StatsView, UserPage, UserView};
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema, Clone)]
pub struct ObjectJson {
    #[serde(rename = "type")]
    pub kind: String,
    pub id: String,
}

/// Only a JSON object `{"type", "id"}` (serde's derive would also take an
/// array `["book", "1"]`).
impl<'de> Deserialize<'de> for ObjectJson {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut m = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let mut take = |k: &str| match m.remove(k) {
            Some(serde_json::Value::String(s)) => Ok(s),
            Some(other) => Err(D::Error::custom(format!("object.{k}: expected a string, found {other}"))),
            None => Err(D::Error::missing_field(if k == "type" { "type" } else { "id" })),
        };
        let (kind, id) = (take("type")?, take("id")?);
        if let Some(k) = m.keys().next() {
            return Err(D::Error::unknown_field(k, &["type", "id"]));
        }
        Ok(ObjectJson { kind, id })
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CountsJson {
    /// Reactions of kind `like`.
    pub likes: u64,
    /// Non-deleted replies.
    pub replies: u64,
    /// Non-deleted reposts.
    pub reposts: u64,
    /// Counts per reaction kind (kinds with a positive count).
    pub reactions: BTreeMap<String, u64>,
}

impl From<&tideway_service::ItemCounts> for CountsJson {
    fn from(c: &tideway_service::ItemCounts) -> Self {
        CountsJson {
            likes: c.of_kind("like"),
            replies: c.replies,
            reposts: c.reposts,
            reactions: c.reactions.iter().cloned().collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct CountsEnvelope {
    pub counts: CountsJson,
}

/// `POST /v1/promotions`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PromotionBody {
    pub item: String,
    /// Inserted after every `every` organic entries (1..=1000).
    pub every: u32,
    pub starts_at: String,
    pub ends_at: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PromotionJson {
    pub id: String,
    pub item: String,
    pub every: u32,
    pub starts_at: String,
    pub ends_at: String,
}

impl From<&tideway_service::Promotion> for PromotionJson {
    fn from(p: &tideway_service::Promotion) -> Self {
        PromotionJson {
            id: p.id.to_string(),
            item: p.item.to_string(),
            every: p.every,
            starts_at: p.starts_at.to_rfc3339(),
            ends_at: p.ends_at.to_rfc3339(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PromotionEnvelope {
    pub promotion: PromotionJson,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ViewerJson {
    pub reactions: Vec<String>,
    pub reposted: bool,
}

/// An item's body, serialized straight from the shared stored body: a page
/// of 20 items with 400-byte bodies copies no JSON map.
#[derive(Debug)]
pub struct Body(pub tideway_core::Body);

impl Serialize for Body {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ItemJson {
    pub id: String,
    pub author: String,
    pub kind: String,
    #[schema(value_type = Object)]
    pub body: Body,
    pub visibility: String,
    pub tags: Vec<String>,
    pub mentions: Vec<String>,
    pub object: Option<ObjectJson>,
    pub repost_of: Option<String>,
    pub reply_to: Option<String>,
    pub created_at: String,
    pub counts: CountsJson,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub viewer: Option<ViewerJson>,
}

fn vis_str(v: tideway_core::Visibility) -> &'static str {
    match v {
        tideway_core::Visibility::Public => "public",
        tideway_core::Visibility::Followers => "followers",
        tideway_core::Visibility::Mentioned => "mentioned",
    }
}

impl From<&ItemView> for ItemJson {
    fn from(v: &ItemView) -> Self {
        let i = &v.item;
        ItemJson {
            id: i.id.to_string(),
            author: i.author.to_string(),
            kind: i.kind.as_string(),
            body: Body(v.body().clone()),
            visibility: vis_str(i.visibility).to_owned(),
            tags: i.tags.clone(),
            mentions: i.mentions.iter().map(UserId::to_string).collect(),
            object: i.object.as_ref().map(|o: &ObjectRef| ObjectJson { kind: o.kind.clone(), id: o.id.clone() }),
            repost_of: i.repost_of.map(|x| x.to_string()),
            reply_to: i.reply_to.map(|x| x.to_string()),
            created_at: i.created_at().to_rfc3339(),
            counts: CountsJson::from(&v.counts),
            viewer: v.viewer.as_ref().map(|s| ViewerJson { reactions: s.reactions.clone(), reposted: s.reposted }),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ItemEnvelope {
    pub item: ItemJson,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ItemsEnvelope {
    pub items: Vec<ItemJson>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SourceJson {
    pub user: String,
    pub item: String,
    pub at: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EntryJson {
    pub cursor: String,
    /// `authored`, `repost`, `inserted` or `promoted` (a promoted entry's
    /// cursor is the one of the organic entry before it).
    pub reason: String,
    pub item: ItemJson,
    pub sources: Vec<SourceJson>,
}

impl From<&EntryView> for EntryJson {
    fn from(e: &EntryView) -> Self {
        EntryJson {
            cursor: e.cursor.clone(),
            reason: e.reason.as_str().to_owned(),
            item: ItemJson::from(&e.item),
            sources: e
                .sources
                .iter()
                .map(|s| SourceJson {
                    user: s.user.to_string(),
                    item: s.item.to_string(),
                    at: s.item.created_at().to_rfc3339(),
                })
                .collect(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct PageJson {
    pub entries: Vec<EntryJson>,
    /// The page older than this one; null at the end.
    pub next_cursor: Option<String>,
    /// The page newer than this one (poll it with `after`).
    pub prev_cursor: Option<String>,
}

impl From<&Page> for PageJson {
    fn from(p: &Page) -> Self {
        PageJson {
            entries: p.entries.iter().map(EntryJson::from).collect(),
            next_cursor: p.next_cursor.clone(),
            prev_cursor: p.prev_cursor.clone(),
        }
    }
}

/// A notification group (SPEC section 2).
#[derive(Debug, Serialize, ToSchema)]
pub struct NotificationGroupJson {
    pub id: String,
    /// `follow`, `reaction`, `repost`, `reply` or `mention`.
    pub verb: String,
    /// The reaction's kind (reactions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// The newest actors, newest first (at most 5).
    pub actors: Vec<String>,
    /// Distinct actors whose event stands.
    pub actor_count: u64,
    /// The item acted on; for a reply or a mention, the reply or the
    /// mentioning item. Absent for follows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub item: Option<ItemJson>,
    pub latest_at: String,
    pub seen: bool,
    pub read: bool,
}

impl From<&NotificationGroup> for NotificationGroupJson {
    fn from(g: &NotificationGroup) -> Self {
        NotificationGroupJson {
            id: g.id.to_string(),
            verb: g.verb.name().to_owned(),
            kind: match &g.verb {
                tideway_core::notify::Verb::Reaction { kind, .. } => Some(kind.clone()),
                _ => None,
            },
            actors: g.actors.iter().map(UserId::to_string).collect(),
            actor_count: g.actor_count,
            item: g.item.as_ref().map(ItemJson::from),
            latest_at: g.latest_at.to_rfc3339(),
            seen: g.seen,
            read: g.read,
        }
    }
}

/// `GET /v1/users/{u}/notifications`.
#[derive(Debug, Serialize, ToSchema)]
pub struct NotificationsJson {
    pub groups: Vec<NotificationGroupJson>,
    /// Groups above the `seen` mark (exact).
    pub unseen: u64,
    /// Groups above the `read` mark (exact).
    pub unread: u64,
    /// The next (older) page; null at the end.
    pub next_cursor: Option<String>,
}

impl From<&NotificationsPage> for NotificationsJson {
    fn from(p: &NotificationsPage) -> Self {
        NotificationsJson {
            groups: p.groups.iter().map(NotificationGroupJson::from).collect(),
            unseen: p.unseen,
            unread: p.unread,
            next_cursor: p.next_cursor.clone(),
        }
    }
}

/// `POST /v1/users/{u}/notifications/seen` and `…/read` (the body may be
/// left out).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MarkBody {
    /// A group id of the user's: the mark moves to its `latest_at`.
    /// Without it, to the newest group's.
    pub up_to: Option<String>,
}

/// `POST /v1/live`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSessionBody {
    pub anchor: String,
    /// When it is planned to start: at most a day ago, at most a year ahead.
    pub scheduled_start: String,
    #[schema(value_type = Option<Object>)]
    pub body: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A live session (SPEC section 5).
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionJson {
    pub id: String,
    pub anchor: String,
    /// `upcoming`, `live` or `replay`.
    pub state: String,
    pub scheduled_start: String,
    /// Null until it starts.
    pub started_at: Option<String>,
    /// Null until it ends.
    pub ended_at: Option<String>,
    #[schema(value_type = Object)]
    pub body: Body,
}

impl From<&tideway_core::live::Session> for SessionJson {
    fn from(s: &tideway_core::live::Session) -> Self {
        SessionJson {
            id: s.id.to_string(),
            anchor: s.anchor.to_string(),
            state: s.phase().as_str().to_owned(),
            scheduled_start: s.scheduled_start.to_rfc3339(),
            started_at: s.started_at.map(Millis::to_rfc3339),
            ended_at: s.ended_at.map(Millis::to_rfc3339),
            body: Body(s.body.clone()),
        }
    }
}

/// `{"session": …}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionEnvelope {
    pub session: SessionJson,
}

/// `GET /v1/users/{u}/live`: live sessions first (newest start first),
/// then upcoming ones (soonest first), as the first page's snapshot holds
/// them, then replays (most recently ended first).
#[derive(Debug, Serialize, ToSchema)]
pub struct LivePageJson {
    pub entries: Vec<SessionEnvelope>,
    /// The next page of this walk (in its snapshot, then into replay);
    /// null at the end. `410 cursor_expired` once the snapshot expired.
    pub next_cursor: Option<String>,
}

impl From<&tideway_service::LivePage> for LivePageJson {
    fn from(p: &tideway_service::LivePage) -> Self {
        LivePageJson {
            entries: p.entries.iter().map(|s| SessionEnvelope { session: SessionJson::from(s) }).collect(),
            next_cursor: p.next_cursor.clone(),
        }
    }
}

/// `POST /v1/items`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateItemBody {
    pub author: String,
    pub kind: Option<String>,
    #[schema(value_type = Option<Object>)]
    pub body: Option<serde_json::Map<String, serde_json::Value>>,
    pub visibility: Option<String>,
    pub tags: Option<Vec<String>>,
    pub mentions: Option<Vec<String>>,
    pub object: Option<ObjectJson>,
    pub repost_of: Option<String>,
    pub reply_to: Option<String>,
    pub created_at: Option<String>,
    pub idempotency_key: Option<String>,
}

/// `PATCH /v1/items/{id}`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PatchItemBody {
    #[schema(value_type = Option<Object>)]
    pub body: Option<serde_json::Map<String, serde_json::Value>>,
    pub visibility: Option<String>,
}

/// `POST /v1/users/{u}/following`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FollowManyBody {
    pub targets: Vec<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FollowResultJson {
    pub target: String,
    /// `followed`, `already`, `blocked` or `limit`.
    pub status: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FollowManyJson {
    pub results: Vec<FollowResultJson>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FollowingJson {
    pub following: bool,
    pub since: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FlagJson {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blocking: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub muting: Option<bool>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ListedUserJson {
    pub id: String,
    pub since: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UserListJson {
    pub users: Vec<ListedUserJson>,
    pub next_cursor: Option<String>,
}

impl From<&UserPage> for UserListJson {
    fn from(p: &UserPage) -> Self {
        UserListJson {
            users: p
                .users
                .iter()
                .map(|(id, since)| ListedUserJson { id: id.to_string(), since: since.to_rfc3339() })
                .collect(),
            next_cursor: p.next_cursor.clone(),
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RelationshipJson {
    pub target: String,
    pub following: bool,
    pub followed_by: bool,
    pub blocking: bool,
    pub blocked_by: bool,
    pub muting: bool,
}

impl RelationshipJson {
    pub fn new(target: UserId, r: &Relation) -> Self {
        RelationshipJson {
            target: target.to_string(),
            following: r.following,
            followed_by: r.followed_by,
            blocking: r.blocking,
            blocked_by: r.blocked_by,
            muting: r.muting,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RelationshipsJson {
    pub relationships: Vec<RelationshipJson>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct UserJson {
    pub id: String,
    pub following_count: u64,
    pub followers_count: u64,
    pub items_count: u64,
    pub hot: bool,
    pub active: bool,
    pub last_active_at: Option<String>,
}

impl From<&UserView> for UserJson {
    fn from(u: &UserView) -> Self {
        UserJson {
            id: u.id.to_string(),
            following_count: u.following,
            followers_count: u.followers,
            items_count: u.items,
            hot: u.hot,
            active: u.active,
            last_active_at: u.last_active_at.map(Millis::to_rfc3339),
        }
    }
}

/// `POST /v1/users/{u}/home/entries`.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct InsertBody {
    pub item: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct InsertedJson {
    pub entry: EntryJson,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct FanoutJson {
    /// Fan-out jobs not finished, on every node (read from the database): 0 once every
    /// accepted write reached every inbox it goes to.
    pub pending: u64,
    /// Deliveries made by this node's worker since it started (not the deployment's).
    pub delivered_total: u64,
    /// Deliveries per second by this node's worker over the last 10 seconds.
    pub deliveries_per_sec: u64,
    /// Age of the oldest pending job on any node: the delivery lag.
    pub oldest_pending_ms: u64,
}

#[derive(Debug, Serialize, ToSchema)]
/// The inboxes of the whole deployment (`null` in `StatsJson` while the shared engine does not
/// answer).
pub struct InboxesJson {
    pub count: u64,
    pub entries: u64,
    pub bytes: u64,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StatsJson {
    pub users: u64,
    pub items: u64,
    pub follows: u64,
    pub fanout: FanoutJson,
    pub inboxes: Option<InboxesJson>,
}

impl From<&StatsView> for StatsJson {
    fn from(s: &StatsView) -> Self {
        StatsJson {
            users: s.users,
            items: s.items,
            follows: s.follows,
            fanout: FanoutJson {
                pending: s.pending,
                delivered_total: s.delivered_total,
                deliveries_per_sec: s.deliveries_per_sec,
                oldest_pending_ms: s.oldest_pending_ms,
            },
            inboxes: s.inboxes.map(|i| InboxesJson { count: i.inboxes, entries: i.entries, bytes: i.bytes }),
        }
    }
}

/// Query of feed pages.
#[derive(Debug, Deserialize, Default)]
pub struct PageQuery {
    pub limit: Option<String>,
    pub before: Option<String>,
    pub after: Option<String>,
    pub viewer: Option<String>,
}

/// Query of the home stream.
#[derive(Debug, Deserialize, Default)]
pub struct StreamQuery {
    pub last_event_id: Option<String>,
}

/// Query of notification pages.
#[derive(Debug, Deserialize, Default)]
pub struct NotificationsQuery {
    pub limit: Option<String>,
    pub before: Option<String>,
}

/// Query of follow lists.
#[derive(Debug, Deserialize, Default)]
pub struct ListQuery {
    pub limit: Option<String>,
    pub cursor: Option<String>,
}

/// Query with a viewer.
#[derive(Debug, Deserialize, Default)]
pub struct ViewerQuery {
    pub viewer: Option<String>,
    pub ids: Option<String>,
    pub targets: Option<String>,
}

pub fn item_id_json(id: ItemId) -> String {
    id.to_string()
}
