//! Millisecond arithmetic for the wire and the clock: leases and timeouts become whole
//! milliseconds at most [`MAX_MILLIS`] (so `Duration::MAX`, "no limit", never overflows a
//! script's `PEXPIRE`), and deadlines saturate instead of panicking.

use std::time::Duration;

use crate::error::{Error, Result};

/// `from + d`, saturating: a sum past what an `Instant` can hold (a `Duration::MAX` setting,
/// which means "no limit") gives an instant about 30 years ahead instead of a panic.
pub(crate) fn later(from: tokio::time::Instant, d: Duration) -> tokio::time::Instant {
    const FAR: Duration = Duration::from_secs(30 * 365 * 86_400);
    from.checked_add(d.min(FAR)).unwrap_or(from)
}

/// Whole milliseconds of `d`, at most [`MAX_MILLIS`].
pub(crate) fn clamp_millis(d: Duration) -> u64 {
    d.as_millis().min(u128::from(MAX_MILLIS)) as u64
}

/// `d`, at most [`MAX_MILLIS`] milliseconds (a lease derived from an unbounded wait).
pub(crate) fn cap(d: Duration) -> Duration {
    d.min(Duration::from_millis(MAX_MILLIS))
}

/// The largest lease accepted, in milliseconds. Redis rejects a `PEXPIRE` whose absolute time
/// overflows, and Redisson's scripts are not rolled back then (a lock without TTL would remain),
/// so longer leases are refused before anything is sent.
pub const MAX_MILLIS: u64 = (i64::MAX / 4) as u64;

/// Validates a lease and turns it into whole milliseconds for the wire.
pub(crate) fn lease_millis(lease: Duration) -> Result<u64> {
    let ms = lease.as_millis();
    if ms == 0 {
        return Err(Error::InvalidArgument(format!(
            "lease must be at least 1 ms, got {lease:?} (use lock() without a lease for the watchdog)"
        )));
    }
    if ms > u128::from(MAX_MILLIS) {
        return Err(Error::InvalidArgument(format!(
            "lease of {lease:?} is too large (at most {MAX_MILLIS} ms)"
        )));
    }
    Ok(ms as u64)
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_saturates_instead_of_panicking() {
        let now = tokio::time::Instant::now();
        assert_eq!(
            later(now, Duration::from_secs(2)),
            now + Duration::from_secs(2)
        );
        assert!(later(now, Duration::MAX) > now + Duration::from_secs(365 * 86_400));
        assert!(later(now, Duration::MAX.saturating_mul(2)) >= later(now, Duration::MAX));
    }

    #[test]
    fn leases_are_validated() {
        assert!(lease_millis(Duration::ZERO).is_err());
        assert!(lease_millis(Duration::from_micros(999)).is_err());
        assert!(lease_millis(Duration::MAX).is_err());
        assert_eq!(lease_millis(Duration::from_secs(2)).unwrap(), 2000);
    }

    #[test]
    fn clamping_caps_at_the_largest_lease() {
        assert_eq!(clamp_millis(Duration::from_micros(2_999)), 2);
        assert_eq!(clamp_millis(Duration::MAX), MAX_MILLIS);
        assert_eq!(
            cap(Duration::from_micros(2_999)),
            Duration::from_micros(2_999)
        );
        assert_eq!(cap(Duration::MAX), Duration::from_millis(MAX_MILLIS));
    }
}
