//! Feeds by name: `group:id`, as GetStream's clients write them (the group
//! `^\w+$`, the id `^[\w-]+$`), and the kind of the group from the settings.

use crate::error::GsError;
use tideway_config::{FeedGroupKind, GetstreamConfig};

/// The longest feed id part tideway takes (the clients' own tests make
/// ids of about 60 characters).
pub const MAX_ID_LEN: usize = 255;

/// A feed's name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FeedId {
    pub group: String,
    pub id: String,
}

impl FeedId {
    /// `group:id`; `InputException` when it is not one.
    pub fn parse(s: &str) -> Result<Self, GsError> {
        let Some((group, id)) = s.split_once(':') else {
            return Err(GsError::input("feed", format!("{s:?} is not a feed id (group:id)")));
        };
        Self::new(group, id)
    }

    /// The feed `id` of `group`, as a path names it.
    pub fn new(group: &str, id: &str) -> Result<Self, GsError> {
        let word = |c: char| c.is_alphanumeric() || c == '_';
        if group.is_empty() || !group.chars().all(word) {
            return Err(GsError::input("feed_slug", format!("{group:?} is not a feed group (letters, digits, _)")));
        }
        if id.is_empty() || id.len() > MAX_ID_LEN || !id.chars().all(|c| word(c) || c == '-') {
            return Err(GsError::input(
                "user_id",
                format!("{id:?} is not a feed id (letters, digits, _ and -, at most {MAX_ID_LEN} bytes)"),
            ));
        }
        Ok(FeedId { group: group.to_owned(), id: id.to_owned() })
    }

    /// The name a server token's `feed_id` gives it: group and id together.
    pub fn signed(&self) -> String {
        format!("{}{}", self.group, self.id)
    }

    /// Its group's kind; `FeedConfigException` for a group not configured.
    pub fn kind(&self, cfg: &GetstreamConfig) -> Result<FeedGroupKind, GsError> {
        cfg.feed_groups.get(&self.group).copied().ok_or_else(|| GsError::feed_config(&[&self.to_string()]))
    }
}

impl std::fmt::Display for FeedId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.group, self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feed_ids_as_the_clients_write_them() {
        let f = FeedId::parse("user:1---test_4a7c0e1e-b1c3-4c4e-9f0e-2d5b1c3a9e77-feed_3").expect("the suite's ids");
        assert_eq!((f.group.as_str(), f.signed().starts_with("user1---")), ("user", true));
        assert_eq!(FeedId::parse("timeline:alice").expect("id").to_string(), "timeline:alice");
        for bad in ["user", "user:", ":1", "us er:1", "user:a b", "user:a:b", "user:é!"] {
            assert_eq!(FeedId::parse(bad).expect_err(bad).code, 4, "{bad}");
        }
        assert!(FeedId::new("user", &"x".repeat(MAX_ID_LEN + 1)).is_err());
    }

    #[test]
    fn a_group_not_configured_is_a_feed_config_error() {
        let cfg = GetstreamConfig::default();
        assert_eq!(FeedId::parse("user:1").expect("id").kind(&cfg).expect("flat"), FeedGroupKind::Flat);
        assert_eq!(FeedId::parse("notification:1").expect("id").kind(&cfg).expect("n"), FeedGroupKind::Notification);
        let e = FeedId::parse("nope:1").expect("id").kind(&cfg).expect_err("not configured");
        assert_eq!((e.code, e.exception), (6, "FeedConfigException"));
    }
}
