//! Rate limits (governor's GCRA token buckets): per user token, optionally
//! per client address, optionally one bucket for server keys. Built once
//! from the configuration; `housekeeping` forgets idle keys.

use crate::auth::Actor;
use governor::clock::{Clock, DefaultClock};
use governor::middleware::StateInformationMiddleware;
use governor::state::keyed::DefaultKeyedStateStore;
use governor::state::{InMemoryState, NotKeyed};
use governor::{Quota, RateLimiter};
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::time::Duration;
use tideway_config::RateLimitConfig;
use tideway_core::UserId;

type Keyed<K> = RateLimiter<K, DefaultKeyedStateStore<K>, DefaultClock, StateInformationMiddleware>;
type Single = RateLimiter<NotKeyed, InMemoryState, DefaultClock, StateInformationMiddleware>;

/// What the limits say about one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No limit applies to this caller.
    Unlimited,
    /// Allowed; the bucket's size and what is left of it.
    Allowed { limit: u32, remaining: u32 },
    /// Refused until `retry_after` has passed.
    Refused { limit: u32, retry_after: Duration },
}

/// Every configured limit.
pub struct RateLimits {
    clock: DefaultClock,
    user: Option<Keyed<UserId>>,
    address: Option<Keyed<IpAddr>>,
    server: Option<Single>,
}

fn quota(burst: u32, per_second: u32) -> Option<Quota> {
    let burst = NonZeroU32::new(burst)?;
    let rate = NonZeroU32::new(per_second)?;
    Some(Quota::per_second(rate).allow_burst(burst))
}

fn keyed<K: std::hash::Hash + Eq + Clone>(burst: u32, per_second: u32) -> Option<Keyed<K>> {
    quota(burst, per_second).map(|q| RateLimiter::keyed(q).with_middleware::<StateInformationMiddleware>())
}

impl RateLimits {
    pub fn new(cfg: &RateLimitConfig) -> Self {
        Self {
            clock: DefaultClock::default(),
            user: keyed(cfg.user_burst, cfg.user_per_second),
            address: keyed(cfg.address_burst, cfg.address_per_second),
            server: quota(cfg.server_burst, cfg.server_per_second)
                .map(|q| RateLimiter::direct(q).with_middleware::<StateInformationMiddleware>()),
        }
    }

    /// No limit at all (benchmarks, tests).
    pub fn unlimited() -> Self {
        Self { clock: DefaultClock::default(), user: None, address: None, server: None }
    }

    /// Takes one request from the buckets that apply: the caller's own
    /// (user or server), then the address's for callers that are not the
    /// server. The strictest answer wins.
    pub fn check(&self, actor: Option<Actor>, address: Option<IpAddr>) -> Verdict {
        let own = match actor {
            Some(Actor::Server) => self.server.as_ref().map(|l| self.verdict(l.check())),
            Some(Actor::User(u)) => self.user.as_ref().map(|l| self.verdict(l.check_key(&u))),
            None => None,
        };
        let by_address = match (actor, address, &self.address) {
            (Some(Actor::Server), ..) => None,
            (_, Some(ip), Some(l)) => Some(self.verdict(l.check_key(&ip))),
            _ => None,
        };
        match (own, by_address) {
            (Some(v @ Verdict::Refused { .. }), _) | (_, Some(v @ Verdict::Refused { .. })) => v,
            (Some(a), Some(b)) => strictest(a, b),
            (Some(v), None) | (None, Some(v)) => v,
            (None, None) => Verdict::Unlimited,
        }
    }

    fn verdict(
        &self,
        r: Result<governor::middleware::StateSnapshot, governor::NotUntil<<DefaultClock as Clock>::Instant>>,
    ) -> Verdict {
        match r {
            Ok(s) => Verdict::Allowed { limit: s.quota().burst_size().get(), remaining: s.remaining_burst_capacity() },
            Err(n) => Verdict::Refused {
                limit: n.quota().burst_size().get(),
                retry_after: n.wait_time_from(self.clock.now()),
            },
        }
    }

    /// Forgets the buckets of keys that are full again (idle callers), so
    /// memory follows the callers of the last minutes, not of all time.
    pub fn housekeeping(&self) {
        if let Some(l) = &self.user {
            l.retain_recent();
            l.shrink_to_fit();
        }
        if let Some(l) = &self.address {
            l.retain_recent();
            l.shrink_to_fit();
        }
    }
}

fn strictest(a: Verdict, b: Verdict) -> Verdict {
    match (a, b) {
        (Verdict::Allowed { remaining: ra, .. }, Verdict::Allowed { remaining: rb, .. }) if rb < ra => b,
        _ => a,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(user: u32, address: u32, server: u32) -> RateLimitConfig {
        RateLimitConfig {
            user_burst: user,
            user_per_second: 1,
            address_burst: address,
            address_per_second: 1,
            server_burst: server,
            server_per_second: 1,
        }
    }

    #[test]
    fn a_user_gets_its_burst_then_is_refused_with_a_wait() {
        let l = RateLimits::new(&cfg(3, 0, 0));
        let me = Some(Actor::User(UserId(7)));
        let remaining: Vec<Verdict> = (0..3).map(|_| l.check(me, None)).collect();
        assert_eq!(
            remaining,
            vec![
                Verdict::Allowed { limit: 3, remaining: 2 },
                Verdict::Allowed { limit: 3, remaining: 1 },
                Verdict::Allowed { limit: 3, remaining: 0 }
            ]
        );
        match l.check(me, None) {
            Verdict::Refused { limit: 3, retry_after } => assert!(retry_after <= Duration::from_secs(1)),
            other => panic!("{other:?}"),
        }
        // Another user has a bucket of its own.
        assert_eq!(l.check(Some(Actor::User(UserId(8))), None), Verdict::Allowed { limit: 3, remaining: 2 });
    }

    #[test]
    fn server_keys_and_the_open_mode_are_unlimited_unless_configured() {
        let l = RateLimits::new(&cfg(1, 1, 0));
        let ip = Some(IpAddr::from([127, 0, 0, 1]));
        for _ in 0..100 {
            assert_eq!(l.check(Some(Actor::Server), ip), Verdict::Unlimited);
        }
        let limited = RateLimits::new(&cfg(0, 0, 2));
        assert!(matches!(limited.check(Some(Actor::Server), None), Verdict::Allowed { .. }));
        assert!(matches!(limited.check(Some(Actor::Server), None), Verdict::Allowed { .. }));
        assert!(matches!(limited.check(Some(Actor::Server), None), Verdict::Refused { .. }));
    }

    #[test]
    fn the_address_limit_covers_unauthenticated_callers_and_users() {
        let l = RateLimits::new(&cfg(0, 2, 0));
        let ip = Some(IpAddr::from([10, 0, 0, 1]));
        assert!(matches!(l.check(None, ip), Verdict::Allowed { remaining: 1, .. }));
        assert!(matches!(l.check(Some(Actor::User(UserId(1))), ip), Verdict::Allowed { remaining: 0, .. }));
        assert!(matches!(l.check(Some(Actor::User(UserId(2))), ip), Verdict::Refused { .. }));
        assert_eq!(l.check(None, None), Verdict::Unlimited);
    }
}
