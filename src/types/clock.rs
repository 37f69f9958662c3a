//! This machine's wall clock, the one place it is read for Redis: [`epoch_ms`].

use std::time::{SystemTime, UNIX_EPOCH};

/// This machine's wall clock in epoch milliseconds, as Redis integers hold it (what Redisson
/// sends as `System.currentTimeMillis()`: the fair lock's and the group lock's deadlines, the
/// permit-expirable semaphore's expiries). 0 for a clock set before 1970.
pub(crate) fn epoch_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_clock_is_epoch_milliseconds() {
        let now = super::epoch_ms();
        assert!(now > 1_600_000_000_000 && now < 4_000_000_000_000, "{now}");
    }
}
