//! ARM throttling: token buckets per subscription, service principal and operation type,
//! plus each subscription's global bucket per operation type (see [`ThrottleConfig`] for
//! the documentation modelled).
//!
//! Real ARM keeps buckets per subscription *and region*; a client talks to one region, so
//! per subscription is what it observes. Buckets refill on tokio time (not scaled time), so
//! paused-time tests can refill them with `advance`.

use std::collections::HashMap;

use tokio::time::Instant;

use crate::config::ThrottleConfig;

/// ARM's operation types, each with its own buckets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum OpClass {
    /// GET, HEAD.
    Read,
    /// PUT, PATCH, POST.
    Write,
    /// DELETE.
    Delete,
}

impl OpClass {
    /// The class of an HTTP method.
    pub(crate) fn of(method: &axum::http::Method) -> Self {
        match *method {
            axum::http::Method::GET | axum::http::Method::HEAD => OpClass::Read,
            axum::http::Method::DELETE => OpClass::Delete,
            _ => OpClass::Write,
        }
    }

    /// ARM's headers of what is left: the principal's bucket, the subscription's global one.
    pub(crate) fn headers(self) -> (&'static str, &'static str) {
        match self {
            OpClass::Read => (
                "x-ms-ratelimit-remaining-subscription-reads",
                "x-ms-ratelimit-remaining-subscription-global-reads",
            ),
            OpClass::Write => (
                "x-ms-ratelimit-remaining-subscription-writes",
                "x-ms-ratelimit-remaining-subscription-global-writes",
            ),
            OpClass::Delete => (
                "x-ms-ratelimit-remaining-subscription-deletes",
                "x-ms-ratelimit-remaining-subscription-global-deletes",
            ),
        }
    }

    /// The word of ARM's throttling message.
    pub(crate) fn singular(self) -> &'static str {
        match self {
            OpClass::Read => "read",
            OpClass::Write => "write",
            OpClass::Delete => "delete",
        }
    }
}

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// Outcome of taking a token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Take {
    /// Allowed; tokens left in the principal's bucket and in the subscription's global one
    /// (reported in `x-ms-ratelimit-remaining-subscription-{reads,writes,deletes}` and
    /// `x-ms-ratelimit-remaining-subscription-global-…`).
    Ok { left: u32, global_left: u32 },
    /// Throttled; seconds until a token is available.
    Throttled(u64),
}

#[derive(Debug)]
pub(crate) struct Throttle {
    cfg: ThrottleConfig,
    /// (subscription, principal or `None` for the global bucket, class) → bucket.
    buckets: HashMap<(String, Option<String>, OpClass), Bucket>,
}

impl Throttle {
    pub(crate) fn new(cfg: ThrottleConfig) -> Self {
        Self {
            cfg,
            buckets: HashMap::new(),
        }
    }

    fn limits(&self, class: OpClass) -> (f64, f64) {
        let (burst, rate) = match class {
            OpClass::Read => (self.cfg.read_burst, self.cfg.read_per_second),
            OpClass::Write => (self.cfg.write_burst, self.cfg.write_per_second),
            OpClass::Delete => (self.cfg.delete_burst, self.cfg.delete_per_second),
        };
        (f64::from(burst), rate)
    }

    /// The bucket's tokens now (refilled), and its refill rate.
    fn level(&mut self, key: (String, Option<String>, OpClass), now: Instant) -> (f64, f64) {
        let (mut burst, mut rate) = self.limits(key.2);
        if key.1.is_none() {
            let m = f64::from(self.cfg.global_multiplier.max(1));
            burst *= m;
            rate *= m;
        }
        let b = self.buckets.entry(key).or_insert(Bucket {
            tokens: burst,
            last: now,
        });
        let elapsed = now.duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(burst);
        b.last = now;
        (b.tokens, rate)
    }

    /// Take one token of `class` for `principal` in `subscription`: from its own bucket and
    /// from the subscription's global one, or from neither.
    pub(crate) fn take(&mut self, subscription: &str, principal: &str, class: OpClass) -> Take {
        if !self.cfg.enabled {
            let (burst, _) = self.limits(class);
            return Take::Ok {
                left: burst as u32,
                global_left: (burst as u32).saturating_mul(self.cfg.global_multiplier),
            };
        }
        let now = Instant::now();
        let sub = subscription.to_ascii_lowercase();
        let own_key = (sub.clone(), Some(principal.to_ascii_lowercase()), class);
        let global_key = (sub, None, class);
        let (own, own_rate) = self.level(own_key.clone(), now);
        let (global, global_rate) = self.level(global_key.clone(), now);
        let wait = |tokens: f64, rate: f64| {
            if tokens >= 1.0 {
                0
            } else if rate <= 0.0 {
                3600
            } else {
                ((1.0 - tokens) / rate).ceil().max(1.0) as u64
            }
        };
        let secs = wait(own, own_rate).max(wait(global, global_rate));
        if secs > 0 {
            return Take::Throttled(secs);
        }
        for key in [own_key, global_key] {
            if let Some(b) = self.buckets.get_mut(&key) {
                b.tokens -= 1.0;
            }
        }
        Take::Ok {
            left: (own - 1.0).floor() as u32,
            global_left: (global - 1.0).floor() as u32,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn buckets_are_per_principal_and_class_under_a_global_one() {
        let cfg = ThrottleConfig {
            read_burst: 2,
            read_per_second: 1.0,
            global_multiplier: 2,
            ..ThrottleConfig::default()
        };
        let mut t = Throttle::new(cfg);
        let ok = |left, global_left| Take::Ok { left, global_left };
        assert_eq!(t.take("s", "a", OpClass::Read), ok(1, 3));
        assert_eq!(t.take("s", "a", OpClass::Read), ok(0, 2));
        assert_eq!(t.take("s", "a", OpClass::Read), Take::Throttled(1));
        // Writes and deletes have their own buckets.
        assert!(matches!(t.take("s", "a", OpClass::Write), Take::Ok { .. }));
        assert!(matches!(t.take("s", "a", OpClass::Delete), Take::Ok { .. }));
        // Another principal has its own bucket, but shares the global one (2 × 2).
        assert_eq!(t.take("s", "b", OpClass::Read), ok(1, 1));
        assert_eq!(t.take("s", "b", OpClass::Read), ok(0, 0));
        assert_eq!(t.take("s", "c", OpClass::Read), Take::Throttled(1));
        // Another subscription is not affected.
        assert!(matches!(t.take("t", "a", OpClass::Read), Take::Ok { .. }));
        tokio::time::advance(std::time::Duration::from_millis(1100)).await;
        assert_eq!(t.take("s", "a", OpClass::Read), ok(0, 1));
    }
}
