//! ARM throttling: one read and one write token bucket per subscription.
//!
//! Real ARM keeps buckets per subscription *and region instance*; a single client talks to
//! one instance, so per subscription is what a client observes. Buckets refill on tokio
//! time (not scaled time), so paused-time tests can refill them with `advance`.

use std::collections::HashMap;

use tokio::time::Instant;

use crate::config::ThrottleConfig;

#[derive(Debug)]
struct Bucket {
    tokens: f64,
    last: Instant,
}

/// Outcome of taking a token.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Take {
    /// Allowed; tokens left (reported in `x-ms-ratelimit-remaining-subscription-*`).
    Ok(u32),
    /// Throttled; seconds until a token is available.
    Throttled(u64),
}

#[derive(Debug)]
pub(crate) struct Throttle {
    cfg: ThrottleConfig,
    buckets: HashMap<(String, bool), Bucket>,
}

impl Throttle {
    pub(crate) fn new(cfg: ThrottleConfig) -> Self {
        Self {
            cfg,
            buckets: HashMap::new(),
        }
    }

    pub(crate) fn take(&mut self, subscription: &str, write: bool) -> Take {
        let (burst, rate) = if write {
            (self.cfg.write_burst, self.cfg.write_per_second)
        } else {
            (self.cfg.read_burst, self.cfg.read_per_second)
        };
        if !self.cfg.enabled {
            return Take::Ok(burst);
        }
        let now = Instant::now();
        let b = self
            .buckets
            .entry((subscription.to_ascii_lowercase(), write))
            .or_insert(Bucket {
                tokens: f64::from(burst),
                last: now,
            });
        let elapsed = now.duration_since(b.last).as_secs_f64();
        b.tokens = (b.tokens + elapsed * rate).min(f64::from(burst));
        b.last = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Take::Ok(b.tokens.floor() as u32)
        } else if rate <= 0.0 {
            Take::Throttled(3600)
        } else {
            Take::Throttled(((1.0 - b.tokens) / rate).ceil().max(1.0) as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn bucket_empties_and_refills() {
        let cfg = ThrottleConfig {
            read_burst: 2,
            read_per_second: 1.0,
            ..ThrottleConfig::default()
        };
        let mut t = Throttle::new(cfg);
        assert_eq!(t.take("s", false), Take::Ok(1));
        assert_eq!(t.take("s", false), Take::Ok(0));
        assert_eq!(t.take("s", false), Take::Throttled(1));
        // Writes have their own bucket.
        assert!(matches!(t.take("s", true), Take::Ok(_)));
        tokio::time::advance(std::time::Duration::from_millis(1100)).await;
        assert_eq!(t.take("s", false), Take::Ok(0));
    }
}
