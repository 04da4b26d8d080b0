//! Thin handlers: extract, authorise, call one service method, map.
//! Service calls are async: a storage engine that waits on a disk does so
//! off the runtime's workers (the embedded store syncs on the blocking pool).

use crate::auth::Actor;
use crate::dto::*;
use crate::error::{ApiError, ApiResult, ErrorBody};
use crate::extract::{self, Json, OptionalJson, Path, Query};
use crate::state::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use tideway_core::limits::{MAX_BATCH_FOLLOW, MAX_BATCH_IDS};
use tideway_core::live::Move;
use tideway_core::notify::Mark;
use tideway_core::{FollowStatus, ListKind};
use tideway_core::{ItemKind, Millis, NewItem, ObjectRef, Visibility};
use tideway_service::PageRequest;

/// A feed page as JSON, serialized into one buffer sized for a page: axum's
/// `Json` starts at 128 bytes and grows about seven times for the ~15 KB of
/// 20 items with 400-byte bodies.
fn page_response(page: &PageJson) -> Response {
    let mut buf = Vec::with_capacity(16 * 1024);
    match serde_json::to_writer(&mut buf, page) {
        Ok(()) => ([(CONTENT_TYPE, "application/json")], buf).into_response(),
        Err(e) => {
            tracing::error!(error = %e, "cannot serialize a page");
            ApiError::internal().into_response()
        }
    }
}

fn page_request(q: &PageQuery) -> ApiResult<PageRequest> {
    Ok(PageRequest { limit: extract::limit(q.limit.as_deref())?, before: q.before.clone(), after: q.after.clone() })
}

fn viewer_param(v: Option<&String>) -> ApiResult<Option<tideway_core::UserId>> {
    v.map(|s| extract::user("viewer", s)).transpose()
}

// ------------------------------------------------------------------ items

#[utoipa::path(post, path = "/v1/items", tag = "items", request_body = CreateItemBody,
    responses((status = 201, body = ItemEnvelope, description = "created"),
              (status = 200, body = ItemEnvelope, description = "idempotent repeat (same key, or the same repost)"),
              (status = 400, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn create_item(
    State(st): State<AppState>,
    actor: Actor,
    Json(b): Json<CreateItemBody>,
) -> ApiResult<Response> {
    let author = extract::user("author", &b.author)?;
    actor.act_as(author)?;
    let repost_of = b.repost_of.as_deref().map(|s| extract::item("repost_of", s)).transpose()?;
    let reply_to = b.reply_to.as_deref().map(|s| extract::item("reply_to", s)).transpose()?;
    let kind = ItemKind::resolve(b.kind.as_deref(), repost_of, reply_to)?;
    let mentions =
        b.mentions.unwrap_or_default().iter().map(|m| extract::user("mentions", m)).collect::<ApiResult<Vec<_>>>()?;
    let new = NewItem {
        author,
        kind,
        body: b.body.map(tideway_core::Body::from).unwrap_or_default(),
        visibility: b.visibility.as_deref().map(Visibility::parse).transpose()?.unwrap_or(Visibility::Public),
        tags: b.tags.unwrap_or_default(),
        mentions,
        object: b.object.map(|o| ObjectRef { kind: o.kind, id: o.id }),
        repost_of,
        reply_to,
        created_at: b.created_at.as_deref().map(|t| Millis::parse_rfc3339("created_at", t)).transpose()?,
        idempotency_key: b.idempotency_key,
    };
    let (view, created) = st.svc.items.create_item(new).await?;
    let status = if created { StatusCode::CREATED } else { StatusCode::OK };
    Ok((status, axum::Json(ItemEnvelope { item: ItemJson::from(&view) })).into_response())
}

#[utoipa::path(get, path = "/v1/items/{id}", tag = "items",
    params(("id" = String, Path, description = "item id"), ("viewer" = Option<String>, Query, description = "viewer (server key)")),
    responses((status = 200, body = ItemEnvelope), (status = 404, body = ErrorBody)))]
pub async fn get_item(
    State(st): State<AppState>,
    actor: Actor,
    Path(id): Path<String>,
    Query(q): Query<ViewerQuery>,
) -> ApiResult<axum::Json<ItemEnvelope>> {
    let id = extract::item("id", &id)?;
    let viewer = actor.viewer(viewer_param(q.viewer.as_ref())?)?;
    let view = st.svc.items.get_item(id, viewer).await?;
    Ok(axum::Json(ItemEnvelope { item: ItemJson::from(&view) }))
}

#[utoipa::path(get, path = "/v1/items", tag = "items",
    params(("ids" = String, Query, description = "comma-separated ids, at most 100"), ("viewer" = Option<String>, Query)),
    responses((status = 200, body = ItemsEnvelope), (status = 400, body = ErrorBody)))]
pub async fn get_items(
    State(st): State<AppState>,
    actor: Actor,
    Query(q): Query<ViewerQuery>,
) -> ApiResult<axum::Json<ItemsEnvelope>> {
    let ids = extract::id_list("ids", q.ids.as_deref().unwrap_or(""), MAX_BATCH_IDS, extract::item)?;
    let viewer = actor.viewer(viewer_param(q.viewer.as_ref())?)?;
    let views = st.svc.items.get_items(&ids, viewer).await?;
    Ok(axum::Json(ItemsEnvelope { items: views.iter().map(ItemJson::from).collect() }))
}

#[utoipa::path(patch, path = "/v1/items/{id}", tag = "items", request_body = PatchItemBody,
    params(("id" = String, Path)),
    responses((status = 200, body = ItemEnvelope), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn patch_item(
    State(st): State<AppState>,
    actor: Actor,
    Path(id): Path<String>,
    Json(b): Json<PatchItemBody>,
) -> ApiResult<axum::Json<ItemEnvelope>> {
    let id = extract::item("id", &id)?;
    let visibility = b.visibility.as_deref().map(Visibility::parse).transpose()?;
    let body = b.body.map(tideway_core::Body::from);
    let view = st.svc.items.patch_item(id, body, visibility, actor.user()).await?;
    Ok(axum::Json(ItemEnvelope { item: ItemJson::from(&view) }))
}

#[utoipa::path(delete, path = "/v1/items/{id}", tag = "items", params(("id" = String, Path)),
    responses((status = 204, description = "deleted (also when it already was)"), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn delete_item(State(st): State<AppState>, actor: Actor, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let id = extract::item("id", &id)?;
    st.svc.items.delete_item(id, actor.user()).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(put, path = "/v1/items/{id}/reactions/{kind}/{user}", tag = "items",
    params(("id" = String, Path), ("kind" = String, Path, description = "like, or an app kind [a-z][a-z0-9_]{0,31}"), ("user" = String, Path)),
    responses((status = 200, body = CountsEnvelope, description = "reacted (idempotent)"), (status = 400, body = ErrorBody),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn react(
    State(st): State<AppState>,
    actor: Actor,
    Path((id, kind, user)): Path<(String, String, String)>,
) -> ApiResult<axum::Json<CountsEnvelope>> {
    let (id, user) = (extract::item("id", &id)?, extract::user("user", &user)?);
    actor.act_as(user)?;
    let counts = st.svc.items.react(id, user, &kind, true).await?;
    Ok(axum::Json(CountsEnvelope { counts: CountsJson::from(&counts) }))
}

#[utoipa::path(delete, path = "/v1/items/{id}/reactions/{kind}/{user}", tag = "items",
    params(("id" = String, Path), ("kind" = String, Path), ("user" = String, Path)),
    responses((status = 204, description = "not reacting (idempotent)"), (status = 400, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn unreact(
    State(st): State<AppState>,
    actor: Actor,
    Path((id, kind, user)): Path<(String, String, String)>,
) -> ApiResult<StatusCode> {
    let (id, user) = (extract::item("id", &id)?, extract::user("user", &user)?);
    actor.act_as(user)?;
    st.svc.items.react(id, user, &kind, false).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/v1/promotions", tag = "feeds", request_body = PromotionBody,
    responses((status = 201, body = PromotionEnvelope), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn create_promotion(
    State(st): State<AppState>,
    actor: Actor,
    Json(b): Json<PromotionBody>,
) -> ApiResult<(StatusCode, axum::Json<PromotionEnvelope>)> {
    if actor != Actor::Server {
        return Err(ApiError::forbidden("only a server key may register promotions"));
    }
    let item = extract::item("item", &b.item)?;
    let starts_at = Millis::parse_rfc3339("starts_at", &b.starts_at)?;
    let ends_at = Millis::parse_rfc3339("ends_at", &b.ends_at)?;
    let every = b.every;
    let p = st.svc.items.create_promotion(item, every, starts_at, ends_at).await?;
    Ok((StatusCode::CREATED, axum::Json(PromotionEnvelope { promotion: PromotionJson::from(&p) })))
}

// ------------------------------------------------------------------ graph

#[utoipa::path(put, path = "/v1/users/{u}/following/{t}", tag = "graph", params(("u" = String, Path), ("t" = String, Path)),
    responses((status = 200, body = FollowingJson), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody), (status = 422, body = ErrorBody)))]
pub async fn follow(
    State(st): State<AppState>,
    actor: Actor,
    Path((u, t)): Path<(String, String)>,
) -> ApiResult<axum::Json<FollowingJson>> {
    let (u, t) = (extract::user("u", &u)?, extract::user("t", &t)?);
    actor.act_as(u)?;
    let since = st.svc.graph.follow(u, t).await?;
    Ok(axum::Json(FollowingJson { following: true, since: since.to_rfc3339() }))
}

#[utoipa::path(delete, path = "/v1/users/{u}/following/{t}", tag = "graph", params(("u" = String, Path), ("t" = String, Path)),
    responses((status = 204, description = "not following (idempotent)")))]
pub async fn unfollow(
    State(st): State<AppState>,
    actor: Actor,
    Path((u, t)): Path<(String, String)>,
) -> ApiResult<StatusCode> {
    let (u, t) = (extract::user("u", &u)?, extract::user("t", &t)?);
    actor.act_as(u)?;
    st.svc.graph.unfollow(u, t).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/v1/users/{u}/following", tag = "graph", request_body = FollowManyBody, params(("u" = String, Path)),
    responses((status = 200, body = FollowManyJson), (status = 400, body = ErrorBody)))]
pub async fn follow_many(
    State(st): State<AppState>,
    actor: Actor,
    Path(u): Path<String>,
    Json(b): Json<FollowManyBody>,
) -> ApiResult<axum::Json<FollowManyJson>> {
    let u = extract::user("u", &u)?;
    actor.act_as(u)?;
    if b.targets.len() > MAX_BATCH_FOLLOW {
        return Err(ApiError::invalid(format!("targets: at most {MAX_BATCH_FOLLOW} per call")));
    }
    let targets = b.targets.iter().map(|t| extract::user("targets", t)).collect::<ApiResult<Vec<_>>>()?;
    let results = st.svc.graph.follow_many(u, &targets).await?;
    Ok(axum::Json(FollowManyJson {
        results: results
            .into_iter()
            .map(|(t, s)| FollowResultJson {
                target: t.to_string(),
                status: match s {
                    FollowStatus::Followed(_) => "followed",
                    FollowStatus::Already(_) => "already",
                    FollowStatus::Blocked => "blocked",
                    FollowStatus::Limit => "limit",
                }
                .to_owned(),
            })
            .collect(),
    }))
}

async fn list(st: AppState, u: String, q: ListQuery, which: ListKind) -> ApiResult<axum::Json<UserListJson>> {
    let u = extract::user("u", &u)?;
    let limit = extract::limit(q.limit.as_deref())?;
    let page = st.svc.graph.list(u, which, limit, q.cursor.as_deref()).await?;
    Ok(axum::Json(UserListJson::from(&page)))
}

#[utoipa::path(get, path = "/v1/users/{u}/following", tag = "graph",
    params(("u" = String, Path), ("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = UserListJson), (status = 400, body = ErrorBody)))]
pub async fn following(
    State(st): State<AppState>,
    _a: Actor,
    Path(u): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<axum::Json<UserListJson>> {
    list(st, u, q, ListKind::Following).await
}

#[utoipa::path(get, path = "/v1/users/{u}/followers", tag = "graph",
    params(("u" = String, Path), ("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = UserListJson), (status = 400, body = ErrorBody)))]
pub async fn followers(
    State(st): State<AppState>,
    _a: Actor,
    Path(u): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<axum::Json<UserListJson>> {
    list(st, u, q, ListKind::Followers).await
}

#[utoipa::path(get, path = "/v1/users/{u}/relationships", tag = "graph",
    params(("u" = String, Path), ("targets" = String, Query, description = "comma-separated, at most 100")),
    responses((status = 200, body = RelationshipsJson), (status = 400, body = ErrorBody)))]
pub async fn relationships(
    State(st): State<AppState>,
    actor: Actor,
    Path(u): Path<String>,
    Query(q): Query<ViewerQuery>,
) -> ApiResult<axum::Json<RelationshipsJson>> {
    let u = extract::user("u", &u)?;
    actor.act_as(u)?;
    let targets = extract::id_list("targets", q.targets.as_deref().unwrap_or(""), MAX_BATCH_IDS, extract::user)?;
    let rels = st.svc.graph.relationships(u, &targets).await?;
    Ok(axum::Json(RelationshipsJson {
        relationships: targets.iter().zip(&rels).map(|(t, r)| RelationshipJson::new(*t, r)).collect(),
    }))
}

async fn set_edge(st: AppState, actor: Actor, u: String, t: String, block: bool, on: bool) -> ApiResult<Response> {
    let (u, t) = (extract::user("u", &u)?, extract::user("t", &t)?);
    actor.act_as(u)?;
    if block {
        st.svc.graph.set_block(u, t, on).await?;
    } else {
        st.svc.graph.set_mute(u, t, on).await?;
    }
    if !on {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let flag = if block {
        FlagJson { blocking: Some(true), muting: None }
    } else {
        FlagJson { blocking: None, muting: Some(true) }
    };
    Ok(axum::Json(flag).into_response())
}

#[utoipa::path(put, path = "/v1/users/{u}/blocks/{t}", tag = "graph", params(("u" = String, Path), ("t" = String, Path)),
    responses((status = 200, body = FlagJson, description = "blocking; follows both ways removed"), (status = 400, body = ErrorBody)))]
pub async fn block(
    State(st): State<AppState>,
    actor: Actor,
    Path((u, t)): Path<(String, String)>,
) -> ApiResult<Response> {
    set_edge(st, actor, u, t, true, true).await
}

#[utoipa::path(delete, path = "/v1/users/{u}/blocks/{t}", tag = "graph", params(("u" = String, Path), ("t" = String, Path)),
    responses((status = 204, description = "not blocking")))]
pub async fn unblock(
    State(st): State<AppState>,
    actor: Actor,
    Path((u, t)): Path<(String, String)>,
) -> ApiResult<Response> {
    set_edge(st, actor, u, t, true, false).await
}

#[utoipa::path(put, path = "/v1/users/{u}/mutes/{t}", tag = "graph", params(("u" = String, Path), ("t" = String, Path)),
    responses((status = 200, body = FlagJson), (status = 400, body = ErrorBody)))]
pub async fn mute(
    State(st): State<AppState>,
    actor: Actor,
    Path((u, t)): Path<(String, String)>,
) -> ApiResult<Response> {
    set_edge(st, actor, u, t, false, true).await
}

#[utoipa::path(delete, path = "/v1/users/{u}/mutes/{t}", tag = "graph", params(("u" = String, Path), ("t" = String, Path)),
    responses((status = 204, description = "not muting")))]
pub async fn unmute(
    State(st): State<AppState>,
    actor: Actor,
    Path((u, t)): Path<(String, String)>,
) -> ApiResult<Response> {
    set_edge(st, actor, u, t, false, false).await
}

#[utoipa::path(get, path = "/v1/users/{u}", tag = "graph", params(("u" = String, Path)), responses((status = 200, body = UserJson)))]
pub async fn user(State(st): State<AppState>, _a: Actor, Path(u): Path<String>) -> ApiResult<axum::Json<UserJson>> {
    let u = extract::user("u", &u)?;
    Ok(axum::Json(UserJson::from(&st.svc.ops.user(u).await?)))
}

// ------------------------------------------------------------------ feeds

#[utoipa::path(get, path = "/v1/users/{u}/home", tag = "feeds",
    params(("u" = String, Path), ("limit" = Option<u32>, Query, description = "1..=100, default 20"),
           ("before" = Option<String>, Query, description = "cursor: older entries"), ("after" = Option<String>, Query, description = "cursor: newer entries")),
    responses((status = 200, body = PageJson), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn home(
    State(st): State<AppState>,
    actor: Actor,
    Path(u): Path<String>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Response> {
    let u = extract::user("u", &u)?;
    actor.act_as(u)?;
    let req = page_request(&q)?;
    let page = st.svc.feeds.home(u, &req).await?;
    Ok(page_response(&PageJson::from(&page)))
}

#[utoipa::path(get, path = "/v1/users/{u}/profile", tag = "feeds",
    params(("u" = String, Path), ("viewer" = Option<String>, Query), ("limit" = Option<u32>, Query), ("before" = Option<String>, Query), ("after" = Option<String>, Query)),
    responses((status = 200, body = PageJson), (status = 400, body = ErrorBody)))]
pub async fn profile(
    State(st): State<AppState>,
    actor: Actor,
    Path(u): Path<String>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Response> {
    let u = extract::user("u", &u)?;
    let viewer = actor.viewer(viewer_param(q.viewer.as_ref())?)?;
    let req = page_request(&q)?;
    let page = st.svc.feeds.profile(u, viewer, &req).await?;
    Ok(page_response(&PageJson::from(&page)))
}

#[utoipa::path(get, path = "/v1/users/{u}/mentions", tag = "feeds",
    params(("u" = String, Path), ("viewer" = Option<String>, Query, description = "only `u` itself: mentions are read as their user"),
           ("limit" = Option<u32>, Query), ("before" = Option<String>, Query), ("after" = Option<String>, Query)),
    responses((status = 200, body = PageJson), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn mentions(
    State(st): State<AppState>,
    actor: Actor,
    Path(u): Path<String>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Response> {
    let u = extract::user("u", &u)?;
    // Read as the user mentioned, like their home: the feed shows what is
    // visible to them (a user token names no one else, as everywhere).
    let viewer = actor.viewer(viewer_param(q.viewer.as_ref())?)?;
    actor.act_as(u)?;
    if viewer.is_some_and(|v| v != u) {
        return Err(ApiError::invalid(format!("viewer: mentions of {u} are read as {u}")));
    }
    let req = page_request(&q)?;
    let page = st.svc.feeds.mentions(u, &req).await?;
    Ok(page_response(&PageJson::from(&page)))
}

#[utoipa::path(get, path = "/v1/users/{u}/notifications", tag = "notifications",
    params(("u" = String, Path), ("limit" = Option<u32>, Query), ("before" = Option<String>, Query)),
    responses((status = 200, body = NotificationsJson), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody)))]
pub async fn notifications(
    State(st): State<AppState>,
    actor: Actor,
    Path(u): Path<String>,
    Query(q): Query<NotificationsQuery>,
) -> ApiResult<axum::Json<NotificationsJson>> {
    let u = extract::user("u", &u)?;
    actor.act_as(u)?;
    let limit = extract::limit(q.limit.as_deref())?;
    let page = st.svc.notifications.page(u, limit, q.before.as_deref()).await?;
    Ok(axum::Json(NotificationsJson::from(&page)))
}

async fn mark(st: AppState, actor: Actor, u: String, body: Option<MarkBody>, which: Mark) -> ApiResult<StatusCode> {
    let u = extract::user("u", &u)?;
    actor.act_as(u)?;
    let up_to = body.and_then(|b| b.up_to).map(|g| extract::item("up_to", &g).map(|id| id.0)).transpose()?;
    st.svc.notifications.mark(u, which, up_to).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[utoipa::path(post, path = "/v1/users/{u}/notifications/seen", tag = "notifications",
    params(("u" = String, Path)), request_body(content = MarkBody, description = "optional"),
    responses((status = 204, description = "the seen mark moved forward (or was already there)"),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody, description = "up_to is not one of the user's groups")))]
pub async fn mark_seen(
    State(st): State<AppState>,
    actor: Actor,
    Path(u): Path<String>,
    OptionalJson(b): OptionalJson<MarkBody>,
) -> ApiResult<StatusCode> {
    mark(st, actor, u, b, Mark::Seen).await
}

#[utoipa::path(post, path = "/v1/users/{u}/notifications/read", tag = "notifications",
    params(("u" = String, Path)), request_body(content = MarkBody, description = "optional"),
    responses((status = 204, description = "the read mark moved forward (or was already there)"),
              (status = 403, body = ErrorBody), (status = 404, body = ErrorBody, description = "up_to is not one of the user's groups")))]
pub async fn mark_read(
    State(st): State<AppState>,
    actor: Actor,
    Path(u): Path<String>,
    OptionalJson(b): OptionalJson<MarkBody>,
) -> ApiResult<StatusCode> {
    mark(st, actor, u, b, Mark::Read).await
}

// ------------------------------------------------------------ home stream

/// The reconnection delay a stream asks of its client.
const STREAM_RETRY: std::time::Duration = std::time::Duration::from_secs(2);

fn sse_event(e: &tideway_service::StreamEvent) -> axum::response::sse::Event {
    use axum::response::sse::Event;
    use tideway_service::StreamEvent as S;
    match e {
        S::Entry(entry) => Event::default()
            .event("entry")
            .id(entry.cursor.clone())
            .data(serde_json::to_string(&EntryJson::from(entry)).unwrap_or_default()),
        S::Delete { id, item } => Event::default()
            .event("delete")
            .id(id.clone())
            .data(serde_json::json!({"item": item.to_string()}).to_string()),
        S::Reset { id, reason } => {
            Event::default().event("reset").id(id.clone()).data(serde_json::json!({"reason": reason}).to_string())
        }
    }
}

#[utoipa::path(get, path = "/v1/users/{u}/home/stream", tag = "feeds",
    params(("u" = String, Path), ("last_event_id" = Option<String>, Query, description = "or the Last-Event-ID header")),
    responses((status = 200, content_type = "text/event-stream",
               description = "Server-Sent Events: `entry` (data: an entry exactly as a home page shows it, cursor included; id: its cursor), `delete` (data: {\"item\": id}; id: an opaque mark of the stream's place), `reset` (data: {\"reason\": …}); a comment every 15 s. Every id resumes (Last-Event-ID) with every missed event once and nothing received before"),
              (status = 403, body = ErrorBody)))]
pub async fn home_stream(
    State(st): State<AppState>,
    actor: Actor,
    Path(u): Path<String>,
    Query(q): Query<StreamQuery>,
    headers: axum::http::HeaderMap,
) -> ApiResult<Response> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    use futures_util::StreamExt;
    let u = extract::user("u", &u)?;
    actor.act_as(u)?;
    let header = headers.get("last-event-id").and_then(|v| v.to_str().ok());
    let last = header.or(q.last_event_id.as_deref());
    let stream = st.svc.stream.open(u, last).await?;
    let hello = Event::default().retry(STREAM_RETRY).comment("tideway home stream");
    let events = futures_util::stream::once(std::future::ready(hello))
        .chain(futures_util::stream::unfold(stream, |mut s| async move { s.next().await.map(|e| (sse_event(&e), s)) }))
        .map(Ok::<Event, std::convert::Infallible>);
    let keep_alive = KeepAlive::new().interval(tideway_service::service::stream::HEARTBEAT);
    let mut resp = Sse::new(events).keep_alive(keep_alive).into_response();
    // nginx buffers proxied responses unless told not to.
    resp.headers_mut().insert("x-accel-buffering", axum::http::HeaderValue::from_static("no"));
    Ok(resp)
}

// ------------------------------------------------------------------- live

#[utoipa::path(post, path = "/v1/live", tag = "live", request_body = CreateSessionBody,
    responses((status = 201, body = SessionEnvelope), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 422, body = ErrorBody, description = "limit_exceeded: the anchor has 100 sessions upcoming or live")))]
pub async fn create_session(
    State(st): State<AppState>,
    actor: Actor,
    Json(b): Json<CreateSessionBody>,
) -> ApiResult<(StatusCode, axum::Json<SessionEnvelope>)> {
    let anchor = extract::user("anchor", &b.anchor)?;
    actor.act_as(anchor)?;
    let at = Millis::parse_rfc3339("scheduled_start", &b.scheduled_start)?;
    let s = st.svc.live.create_session(anchor, at, b.body.map(tideway_core::Body::from).unwrap_or_default()).await?;
    Ok((StatusCode::CREATED, axum::Json(SessionEnvelope { session: SessionJson::from(&s) })))
}

/// A step of session `id`, taken as its anchor.
async fn move_session(st: AppState, actor: Actor, id: String, step: Move) -> ApiResult<axum::Json<SessionEnvelope>> {
    let id = extract::item("id", &id)?.0;
    let s = st.svc.live.session(id).await?;
    actor.act_as(s.anchor)?;
    let s = st.svc.live.move_session(id, step).await?;
    Ok(axum::Json(SessionEnvelope { session: SessionJson::from(&s) }))
}

#[utoipa::path(post, path = "/v1/live/{id}/start", tag = "live", params(("id" = String, Path)),
    responses((status = 200, body = SessionEnvelope), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, body = ErrorBody, description = "conflict: the session is not upcoming")))]
pub async fn start_session(
    State(st): State<AppState>,
    actor: Actor,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<SessionEnvelope>> {
    move_session(st, actor, id, Move::Start).await
}

#[utoipa::path(post, path = "/v1/live/{id}/end", tag = "live", params(("id" = String, Path)),
    responses((status = 200, body = SessionEnvelope), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody),
              (status = 409, body = ErrorBody, description = "conflict: the session is not live")))]
pub async fn end_session(
    State(st): State<AppState>,
    actor: Actor,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<SessionEnvelope>> {
    move_session(st, actor, id, Move::End).await
}

#[utoipa::path(get, path = "/v1/users/{u}/live", tag = "live",
    params(("u" = String, Path), ("limit" = Option<u32>, Query), ("cursor" = Option<String>, Query)),
    responses((status = 200, body = LivePageJson), (status = 400, body = ErrorBody), (status = 403, body = ErrorBody),
              (status = 410, body = ErrorBody, description = "cursor_expired: the walk's snapshot expired; start over")))]
pub async fn live(
    State(st): State<AppState>,
    actor: Actor,
    Path(u): Path<String>,
    Query(q): Query<ListQuery>,
) -> ApiResult<axum::Json<LivePageJson>> {
    let u = extract::user("u", &u)?;
    actor.act_as(u)?;
    let limit = extract::limit(q.limit.as_deref())?;
    let page = st.svc.live.page(u, q.cursor.as_deref(), limit).await?;
    Ok(axum::Json(LivePageJson::from(&page)))
}

#[utoipa::path(get, path = "/v1/tags/{tag}/feed", tag = "feeds",
    params(("tag" = String, Path, description = "matched lowercased, as stored"), ("viewer" = Option<String>, Query),
           ("limit" = Option<u32>, Query), ("before" = Option<String>, Query), ("after" = Option<String>, Query)),
    responses((status = 200, body = PageJson), (status = 400, body = ErrorBody)))]
pub async fn tag_feed(
    State(st): State<AppState>,
    actor: Actor,
    Path(tag): Path<String>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Response> {
    let viewer = actor.viewer(viewer_param(q.viewer.as_ref())?)?;
    let req = page_request(&q)?;
    let page = st.svc.feeds.tag_feed(&tag, viewer, &req).await?;
    Ok(page_response(&PageJson::from(&page)))
}

#[utoipa::path(get, path = "/v1/objects/{type}/{object_id}/feed", tag = "feeds",
    params(("type" = String, Path), ("object_id" = String, Path), ("viewer" = Option<String>, Query),
           ("limit" = Option<u32>, Query), ("before" = Option<String>, Query), ("after" = Option<String>, Query)),
    responses((status = 200, body = PageJson), (status = 400, body = ErrorBody)))]
pub async fn object_feed(
    State(st): State<AppState>,
    actor: Actor,
    Path((kind, id)): Path<(String, String)>,
    Query(q): Query<PageQuery>,
) -> ApiResult<Response> {
    let viewer = actor.viewer(viewer_param(q.viewer.as_ref())?)?;
    let req = page_request(&q)?;
    let page = st.svc.feeds.object_feed(&kind, &id, viewer, &req).await?;
    Ok(page_response(&PageJson::from(&page)))
}

#[utoipa::path(post, path = "/v1/users/{u}/home/entries", tag = "feeds", request_body = InsertBody, params(("u" = String, Path)),
    responses((status = 201, body = InsertedJson), (status = 404, body = ErrorBody)))]
pub async fn insert_home(
    State(st): State<AppState>,
    actor: Actor,
    Path(u): Path<String>,
    Json(b): Json<InsertBody>,
) -> ApiResult<(StatusCode, axum::Json<InsertedJson>)> {
    let u = extract::user("u", &u)?;
    actor.act_as(u)?;
    let item = extract::item("item", &b.item)?;
    let entry = st.svc.feeds.insert_home(u, item).await?;
    Ok((StatusCode::CREATED, axum::Json(InsertedJson { entry: EntryJson::from(&entry) })))
}

// ------------------------------------------------------------- operations

#[utoipa::path(get, path = "/v1/stats", tag = "operations", responses((status = 200, body = StatsJson)))]
pub async fn stats(State(st): State<AppState>, _a: Actor) -> ApiResult<axum::Json<StatsJson>> {
    Ok(axum::Json(StatsJson::from(&st.svc.ops.stats().await?)))
}

#[utoipa::path(get, path = "/healthz", tag = "operations", security(()),
    responses((status = 200, description = "the process is alive; an engine that is away does not change this"),
              (status = 503, body = ErrorBody, description = "storage failed in a way only a restart recovers from (the embedded store after a write failed to reach the disk): restart the process")))]
pub async fn healthz(State(st): State<AppState>) -> ApiResult<axum::Json<serde_json::Value>> {
    st.svc.ops.liveness().await.map_err(|e| {
        tracing::error!(error = %e, "liveness: storage failed; the process must restart");
        ApiError::unavailable(format!("storage failed and takes no writes until a restart: {e}"))
    })?;
    Ok(axum::Json(serde_json::json!({"status": "ok"})))
}

#[utoipa::path(get, path = "/readyz", tag = "operations", security(()),
    responses((status = 200, description = "this node can serve pages: its database answered the last probe (at most a few seconds ago); Redis partly or wholly away does not make it unready"),
              (status = 503, body = ErrorBody, description = "the database does not answer (or has not been probed for seconds), or this node's clock is further from the database's than server.max_clock_offset (its writes are refused): send requests to another node; the message says which")))]
pub async fn readyz(State(st): State<AppState>) -> ApiResult<axum::Json<serde_json::Value>> {
    st.svc.ops.readiness().map_err(|why| ApiError::unavailable(format!("not ready: {why}")))?;
    Ok(axum::Json(serde_json::json!({"status": "ready"})))
}

/// Sets the gauges read from storage when `/metrics` is scraped. Figures
/// of the whole deployment carry `scope="deployment"`; a figure that cannot
/// be read now is `NaN` (unknown), never a stale or made-up 0.
async fn scrape_gauges(st: &AppState) {
    metrics::gauge!("tideway_home_streams_open").set(st.svc.stream.streams_open() as f64);
    let s = st.svc.ops.stats().await.ok();
    let d = |f: fn(&tideway_service::StatsView) -> u64| s.as_ref().map_or(f64::NAN, |s| f(s) as f64);
    let scope = ("scope", "deployment");
    metrics::gauge!("tideway_fanout_pending", &[scope]).set(d(|s| s.pending));
    metrics::gauge!("tideway_fanout_oldest_pending_ms", &[scope]).set(d(|s| s.oldest_pending_ms));
    metrics::gauge!("tideway_items", &[scope]).set(d(|s| s.items));
    metrics::gauge!("tideway_follows", &[scope]).set(d(|s| s.follows));
    metrics::gauge!("tideway_fanout_deliveries_per_sec").set(d(|s| s.deliveries_per_sec));
    let ib = s.as_ref().and_then(|s| s.inboxes);
    metrics::gauge!("tideway_inbox_entries", &[scope]).set(ib.map_or(f64::NAN, |i| i.entries as f64));
    metrics::gauge!("tideway_inbox_bytes", &[scope]).set(ib.map_or(f64::NAN, |i| i.bytes as f64));
    // The embedded index (this process's): absent on the other backends.
    if let Some(ix) = s.as_ref().and_then(|s| s.index) {
        metrics::gauge!("tideway_index_bytes").set(ix.bytes as f64);
        metrics::gauge!("tideway_index_budget_bytes").set(ix.budget as f64);
        metrics::gauge!("tideway_index_holders").set(ix.holders as f64);
        metrics::counter!("tideway_index_hits_total").absolute(ix.hits);
        metrics::counter!("tideway_index_misses_total").absolute(ix.misses);
        metrics::counter!("tideway_index_loads_total").absolute(ix.loads);
        metrics::counter!("tideway_index_evictions_total").absolute(ix.evictions);
        metrics::gauge!("tideway_disk_pinned_bytes").set(ix.disk_pinned as f64);
        metrics::gauge!("tideway_disk_buffered_bytes").set(ix.disk_buffered as f64);
    }
}

#[utoipa::path(get, path = "/metrics", tag = "operations", security(()), responses((status = 200, description = "Prometheus text format")))]
pub async fn metrics(State(st): State<AppState>) -> Response {
    scrape_gauges(&st).await;
    let body = st.metrics.as_ref().map(|h| h.render()).unwrap_or_default();
    ([(CONTENT_TYPE, "text/plain; version=0.0.4")], body).into_response()
}

pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no route for {}; see /openapi.json", uri.path()))
}

pub async fn method_not_allowed(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}; see /openapi.json", uri.path()),
    )
}
