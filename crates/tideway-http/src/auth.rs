//! Who is calling: a server key (may do anything), a user token (may act
//! only as its `sub`), or anyone when no key is configured (loopback only).

use crate::error::ApiError;
use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use jsonwebtoken::{Algorithm, DecodingKey, Validation};
use serde::Deserialize;
use std::sync::Arc;
use tideway_config::AuthConfig;
use tideway_core::UserId;

/// The caller as the edge authenticated it, once per request (the [`Actor`]
/// extractor reads it).
#[derive(Clone)]
pub struct Authenticated(pub Result<Actor, ApiError>);

/// Checks bearer tokens. Built once from the configuration.
pub struct Authenticator {
    server_keys: Vec<Vec<u8>>,
    jwt: Option<(DecodingKey, Validation)>,
}

#[derive(Debug, Deserialize)]
struct Claims {
    sub: String,
}

impl Authenticator {
    pub fn new(cfg: &AuthConfig) -> Self {
        let jwt = cfg.jwt_secret.as_ref().map(|s| {
            let mut v = Validation::new(Algorithm::HS256);
            v.set_required_spec_claims(&["exp", "sub"]);
            v.leeway = cfg.jwt_leeway.0.as_secs();
            v.validate_nbf = true;
            (DecodingKey::from_secret(s.as_bytes()), v)
        });
        Self { server_keys: cfg.server_keys.iter().map(|k| k.as_bytes().to_vec()).collect(), jwt }
    }

    pub fn is_open(&self) -> bool {
        self.server_keys.is_empty() && self.jwt.is_none()
    }

    /// The caller named by an `Authorization` header value (or its absence).
    pub fn authenticate(&self, header: Option<&str>) -> Result<Actor, ApiError> {
        let Some(header) = header else {
            if self.is_open() {
                return Ok(Actor::Server);
            }
            return Err(ApiError::unauthenticated("missing Authorization: Bearer <token>"));
        };
        // RFC 7235: the scheme is case-insensitive.
        let token = match header.split_once(' ') {
            Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim_start(),
            _ => return Err(ApiError::unauthenticated("Authorization must be `Bearer <token>`")),
        };
        if self.is_open() {
            return Ok(Actor::Server);
        }
        if self.server_keys.iter().any(|k| constant_time_eq(k, token.as_bytes())) {
            return Ok(Actor::Server);
        }
        let Some((key, validation)) = &self.jwt else {
            return Err(ApiError::unauthenticated("unknown server key"));
        };
        let data = jsonwebtoken::decode::<Claims>(token, key, validation)
            .map_err(|e| ApiError::unauthenticated(format!("invalid token: {e}")))?;
        let user = UserId::parse("sub", &data.claims.sub)
            .map_err(|_| ApiError::unauthenticated("token sub must be a user id (decimal string)"))?;
        Ok(Actor::User(user))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The authenticated caller.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Actor {
    Server,
    User(UserId),
}

impl Actor {
    /// Fails unless the caller may act as `u`.
    pub fn act_as(self, u: UserId) -> Result<(), ApiError> {
        match self {
            Actor::Server => Ok(()),
            Actor::User(me) if me == u => Ok(()),
            Actor::User(me) => Err(ApiError::forbidden(format!("a token of user {me} may not act as user {u}"))),
        }
    }

    /// The user a user token acts as (`None` for the server).
    pub fn user(self) -> Option<UserId> {
        match self {
            Actor::Server => None,
            Actor::User(u) => Some(u),
        }
    }

    /// The viewer of a read: `?viewer=` for the server; for a user token its
    /// own user (and `?viewer=` may only name it).
    pub fn viewer(self, asked: Option<UserId>) -> Result<Option<UserId>, ApiError> {
        match (self, asked) {
            (Actor::Server, v) => Ok(v),
            (Actor::User(me), None) => Ok(Some(me)),
            (Actor::User(me), Some(v)) => {
                self.act_as(v)?;
                Ok(Some(me))
            }
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Actor
where
    Arc<Authenticator>: axum::extract::FromRef<S>,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        // The edge middleware authenticated the request once already.
        if let Some(Authenticated(a)) = parts.extensions.get::<Authenticated>() {
            return a.clone();
        }
        let auth: Arc<Authenticator> = axum::extract::FromRef::from_ref(state);
        let header = match parts.headers.get(AUTHORIZATION) {
            Some(h) => Some(h.to_str().map_err(|_| ApiError::unauthenticated("Authorization header is not ASCII"))?),
            None => None,
        };
        auth.authenticate(header)
    }
}
