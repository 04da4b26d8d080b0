//! The OpenAPI 3 document, generated from the handler annotations and DTOs.

use crate::dto::*;
use crate::error::{ErrorBody, ErrorDetail};
use crate::handlers;
use utoipa::OpenApi;

#[derive(OpenApi)]
#[openapi(
    info(title = "tideway", description = "A self-hosted feed service: home, profile and more, over HTTP."),
    paths(
        handlers::create_item, handlers::get_item, handlers::get_items, handlers::patch_item, handlers::delete_item,
        handlers::react, handlers::unreact, handlers::create_promotion,
        handlers::follow, handlers::unfollow, handlers::follow_many, handlers::following, handlers::followers,
        handlers::relationships, handlers::block, handlers::unblock, handlers::mute, handlers::unmute, handlers::user,
        handlers::home, handlers::profile, handlers::insert_home,
        handlers::stats, handlers::healthz, handlers::readyz, handlers::metrics,
    ),
    components(schemas(ErrorBody, ErrorDetail, ItemJson, ItemEnvelope, ItemsEnvelope, CountsJson, ViewerJson, ObjectJson,
        EntryJson, SourceJson, PageJson, CreateItemBody, PatchItemBody, FollowManyBody, FollowManyJson, FollowResultJson,
        FollowingJson, FlagJson, UserListJson, ListedUserJson, RelationshipsJson, RelationshipJson, UserJson, InsertBody,
        InsertedJson, StatsJson, FanoutJson, InboxesJson, CountsEnvelope, PromotionBody, PromotionJson, PromotionEnvelope)),
    modifiers(&Security),
)]
pub struct ApiDoc;

struct Security;

impl utoipa::Modify for Security {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = doc.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new().scheme(HttpAuthScheme::Bearer).bearer_format("server key or HS256 JWT").build(),
            ),
        );
        doc.security = Some(vec![utoipa::openapi::security::SecurityRequirement::new("bearer", Vec::<String>::new())]);
    }
}

/// The document as JSON.
pub fn document_json() -> String {
    ApiDoc::openapi().to_pretty_json().unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}
