//! Who calls, as GetStream decides it: the app's `api_key` in the query
//! first (a wrong one is `ApiKeyException` whatever the token), then the
//! JWT in `Authorization` (raw, no `Bearer`; `stream-auth-type: jwt`),
//! signed HS256 with the app's secret, then what its claims allow.
//!
//! - A **server token** carries `resource`, `action` and `feed_id`, each a
//!   value, a comma-separated list, or `*`. `feed_id` names a feed as its
//!   group and id written together (`user1` for `user:1`, as the clients
//!   sign it; `user:1` is accepted too); calls not on one feed need `*`.
//! - A **user token** carries `user_id`: it reads its own feeds (the id is
//!   its `user_id`) and any feed of group `user`, and writes only its own.
//!   Calls on no single feed (batches, lookups by id) are the server's.
//!
//! `exp` and `nbf` are checked when present; GetStream's clients send
//! neither, so none is required.

use crate::error::GsError;
use crate::feed_id::FeedId;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;

/// What a call acts on, as a server token's `resource` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// A feed's activities (read, add, remove; add_to_many).
    Feed,
    /// Follows (follow, unfollow, their lists, follow_many, unfollow_many).
    Follower,
    /// An activity's `to` targets.
    FeedTargets,
    /// Activities by id or `foreign_id` (lookup, update, partial update).
    Activities,
    /// Calls both clients sign with `*` (follow stats).
    Any,
}

impl Resource {
    fn name(self) -> &'static str {
        match self {
            Resource::Feed => "feed",
            Resource::Follower => "follower",
            Resource::FeedTargets => "feed_targets",
            Resource::Activities => "activities",
            Resource::Any => "*",
        }
    }
}

/// What a call does to it, from its method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Read,
    Write,
    Delete,
}

impl Action {
    /// GET reads, DELETE deletes, the rest write.
    pub fn of_method(method: &axum::http::Method) -> Self {
        match *method {
            axum::http::Method::GET | axum::http::Method::HEAD => Action::Read,
            axum::http::Method::DELETE => Action::Delete,
            _ => Action::Write,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Action::Read => "read",
            Action::Write => "write",
            Action::Delete => "delete",
        }
    }
}

/// What one call needs its token to allow.
#[derive(Debug, Clone, Copy)]
pub struct Need<'a> {
    pub resource: Resource,
    pub action: Action,
    /// The feed the call is on (`None`: a call on no single feed).
    pub feed: Option<&'a FeedId>,
}

/// The caller a token names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Caller {
    /// A server token's claims, as lists (`*` allows any).
    Server { resources: Vec<String>, actions: Vec<String>, feed_ids: Vec<String> },
    /// A user token.
    User { user_id: String },
}

#[derive(Deserialize)]
struct Claims {
    resource: Option<String>,
    action: Option<String>,
    feed_id: Option<String>,
    user_id: Option<serde_json::Value>,
}

fn list(v: Option<String>) -> Vec<String> {
    v.map(|s| s.split(',').map(|p| p.trim().to_owned()).filter(|p| !p.is_empty()).collect()).unwrap_or_default()
}

/// The app's key and secret: checks each call's credentials.
pub struct Credentials {
    api_key: String,
    key: DecodingKey,
    validation: Validation,
}

impl Credentials {
    pub fn new(api_key: &str, api_secret: &str) -> Self {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.required_spec_claims.clear();
        validation.validate_exp = true;
        validation.validate_nbf = true;
        validation.validate_aud = false;
        Credentials { api_key: api_key.to_owned(), key: DecodingKey::from_secret(api_secret.as_bytes()), validation }
    }

    /// The caller of a call with `api_key` in its query, `authorization`
    /// and `auth_type` (`stream-auth-type`) in its headers.
    pub fn caller(
        &self,
        api_key: Option<&str>,
        authorization: Option<&str>,
        auth_type: Option<&str>,
    ) -> Result<Caller, GsError> {
        match api_key {
            None | Some("") => return Err(GsError::api_key("api_key is missing")),
            Some(k) if k != self.api_key => return Err(GsError::api_key("api_key not valid")),
            Some(_) => {}
        }
        if let Some(t) = auth_type
            && !t.eq_ignore_ascii_case("jwt")
        {
            return Err(GsError::not_allowed(format!("stream-auth-type {t:?} is not supported: send a JWT")));
        }
        let token = match authorization.map(str::trim) {
            None | Some("") => return Err(GsError::not_allowed("Missing auth header.")),
            // (GetStream's clients send the token raw; a `Bearer ` prefix is
            // what other HTTP clients add)
            Some(t) => t.strip_prefix("Bearer ").unwrap_or(t).trim(),
        };
        let claims = jsonwebtoken::decode::<Claims>(token, &self.key, &self.validation)
            .map_err(|e| GsError::not_allowed(token_problem(&e)))?
            .claims;
        if claims.resource.is_some() || claims.action.is_some() {
            return Ok(Caller::Server {
                resources: list(claims.resource),
                actions: list(claims.action),
                feed_ids: list(claims.feed_id),
            });
        }
        match claims.user_id {
            Some(serde_json::Value::String(u)) if !u.is_empty() => Ok(Caller::User { user_id: u }),
            Some(serde_json::Value::Number(n)) => Ok(Caller::User { user_id: n.to_string() }),
            _ => Err(GsError::not_allowed("the token names neither a resource nor a user_id")),
        }
    }
}

fn token_problem(e: &jsonwebtoken::errors::Error) -> String {
    use jsonwebtoken::errors::ErrorKind::*;
    match e.kind() {
        InvalidSignature => "signature is invalid".into(),
        InvalidToken | Base64(_) | Json(_) | Utf8(_) => "token contains an invalid number of segments".into(),
        InvalidAlgorithm | InvalidAlgorithmName => "the token is not signed with HS256".into(),
        ExpiredSignature => "the token has expired".into(),
        ImmatureSignature => "the token is not valid yet".into(),
        _ => format!("the token is not valid: {e}"),
    }
}

impl Caller {
    /// Whether this caller may make a call that needs `need`;
    /// `NotAllowedException` with the reason when not.
    pub fn allows(&self, need: &Need<'_>) -> Result<(), GsError> {
        let denied = || GsError::not_allowed("You do not have permission to perform this action.");
        match self {
            Caller::Server { resources, actions, feed_ids } => {
                let has = |list: &[String], v: &str| list.iter().any(|x| x == "*" || x == v);
                let resource_ok =
                    need.resource == Resource::Any && !resources.is_empty() || has(resources, need.resource.name());
                let feed_ok = match need.feed {
                    Some(f) => feed_ids.iter().any(|x| x == "*" || *x == f.signed() || *x == f.to_string()),
                    None => feed_ids.iter().any(|x| x == "*"),
                };
                if resource_ok && has(actions, need.action.name()) && feed_ok { Ok(()) } else { Err(denied()) }
            }
            Caller::User { user_id } => match (need.feed, need.action) {
                (Some(f), Action::Read) if f.id == *user_id || f.group == "user" => Ok(()),
                (Some(f), _) if f.id == *user_id => Ok(()),
                _ => Err(denied()),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use jsonwebtoken::{EncodingKey, Header, encode};
    use serde_json::json;

    const KEY: &str = "key";
    const SECRET: &str = "secret-of-the-app-at-least-32-bytes";

    fn token(claims: serde_json::Value, secret: &str) -> String {
        encode(&Header::new(Algorithm::HS256), &claims, &EncodingKey::from_secret(secret.as_bytes())).expect("signed")
    }

    fn creds() -> Credentials {
        Credentials::new(KEY, SECRET)
    }

    fn feed(s: &str) -> FeedId {
        FeedId::parse(s).expect("a feed id")
    }

    #[test]
    fn the_api_key_is_checked_before_the_signature() {
        let bad = token(json!({"resource": "feed", "action": "write", "feed_id": "user1"}), "another-secret");
        let e = creds().caller(Some("5crf3bhfzesnMISSING"), Some(&bad), Some("jwt")).expect_err("wrong key");
        assert_eq!((e.code, e.exception), (2, "ApiKeyException"));
        let e = creds().caller(None, Some(&bad), Some("jwt")).expect_err("no key");
        assert_eq!(e.code, 2);
        let e = creds().caller(Some(KEY), Some(&bad), Some("jwt")).expect_err("bad signature");
        assert_eq!((e.code, e.exception, e.detail.as_str()), (17, "NotAllowedException", "signature is invalid"));
        let e = creds().caller(Some(KEY), None, Some("jwt")).expect_err("no token");
        assert_eq!((e.code, e.detail.as_str()), (17, "Missing auth header."));
        let e = creds().caller(Some(KEY), Some("not.a-token"), Some("jwt")).expect_err("garbage");
        assert_eq!(e.code, 17);
    }

    #[test]
    fn server_tokens_allow_what_their_claims_name() {
        // As stream-python signs a feed's calls: group and id without the colon.
        let t = token(json!({"resource": "feed", "action": "write", "feed_id": "user1"}), SECRET);
        let c = creds().caller(Some(KEY), Some(&t), Some("jwt")).expect("caller");
        let (user1, user2) = (feed("user:1"), feed("user:2"));
        let need = |resource, action, feed| Need { resource, action, feed };
        assert!(c.allows(&need(Resource::Feed, Action::Write, Some(&user1))).is_ok());
        assert_eq!(c.allows(&need(Resource::Feed, Action::Write, Some(&user2))).expect_err("another feed").code, 17);
        assert!(c.allows(&need(Resource::Feed, Action::Read, Some(&user1))).is_err(), "read is not write");
        assert!(c.allows(&need(Resource::Follower, Action::Write, Some(&user1))).is_err(), "another resource");
        assert!(c.allows(&need(Resource::Feed, Action::Write, None)).is_err(), "a call on no one feed needs *");
        // The client-level token (`feed_id` and `action` *), and lists.
        let t = token(json!({"resource": "activities", "action": "*", "feed_id": "*"}), SECRET);
        let c = creds().caller(Some(KEY), Some(&t), Some("jwt")).expect("caller");
        assert!(c.allows(&need(Resource::Activities, Action::Write, None)).is_ok());
        assert!(c.allows(&need(Resource::Feed, Action::Read, Some(&user1))).is_err());
        let t = token(json!({"resource": "feed,follower", "action": "read,write", "feed_id": "user:2"}), SECRET);
        let c = creds().caller(Some(KEY), Some(&t), None).expect("caller");
        assert!(c.allows(&need(Resource::Follower, Action::Read, Some(&user2))).is_ok());
        assert!(c.allows(&need(Resource::Follower, Action::Delete, Some(&user2))).is_err());
        // Follow stats: both clients sign it `*`.
        let t = token(json!({"resource": "*", "action": "*", "feed_id": "*"}), SECRET);
        let c = creds().caller(Some(KEY), Some(&t), Some("jwt")).expect("caller");
        assert!(c.allows(&need(Resource::Any, Action::Read, None)).is_ok());
    }

    #[test]
    fn user_tokens_read_their_feeds_and_user_feeds_and_write_their_own() {
        let t = token(json!({"user_id": "alice"}), SECRET);
        let c = creds().caller(Some(KEY), Some(&t), Some("jwt")).expect("caller");
        assert_eq!(c, Caller::User { user_id: "alice".into() });
        let read = |f: &FeedId| c.allows(&Need { resource: Resource::Feed, action: Action::Read, feed: Some(f) });
        let write = |f: &FeedId| c.allows(&Need { resource: Resource::Feed, action: Action::Write, feed: Some(f) });
        assert!(read(&feed("timeline:alice")).is_ok());
        assert!(read(&feed("user:bob")).is_ok(), "anyone's user feed");
        assert!(read(&feed("timeline:bob")).is_err(), "not another's timeline");
        assert!(write(&feed("user:alice")).is_ok());
        assert!(write(&feed("user:bob")).is_err());
        let batch = Need { resource: Resource::Activities, action: Action::Read, feed: None };
        assert!(c.allows(&batch).is_err(), "calls on no one feed are the server's");
        let expired = token(json!({"user_id": "alice", "exp": 1_000_000_000}), SECRET);
        assert_eq!(creds().caller(Some(KEY), Some(&expired), Some("jwt")).expect_err("expired").code, 17);
        let nobody = token(json!({"foo": "bar"}), SECRET);
        assert_eq!(creds().caller(Some(KEY), Some(&nobody), Some("jwt")).expect_err("no claims").code, 17);
    }
}
