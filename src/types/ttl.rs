//! The remaining time to live of a lock, as a type instead of `PTTL`'s reply codes.

use std::time::Duration;

/// Remaining time to live of a lock key (`PTTL`).
///
/// ```
/// use std::time::Duration;
/// use redisson_lock::Ttl;
/// assert_eq!(Ttl::Expires(Duration::from_millis(1500)).as_pttl(), 1500);
/// assert_eq!(Ttl::NotLocked.as_pttl(), -2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// No such key: the lock is free (`-2`).
    NotLocked,
    /// The key has no expiry (`-1`): left by a foreign client without a TTL.
    NoExpiry,
    /// The key expires after this long.
    Expires(Duration),
}

impl Ttl {
    /// Decodes a `PTTL` reply.
    pub(crate) fn from_pttl(ms: i64) -> Ttl {
        match ms {
            -2 => Ttl::NotLocked,
            ms if ms < 0 => Ttl::NoExpiry,
            ms => Ttl::Expires(Duration::from_millis(ms as u64)),
        }
    }

    /// The `PTTL` encoding: milliseconds, `-1` no expiry, `-2` no lock.
    pub fn as_pttl(self) -> i64 {
        match self {
            Ttl::NotLocked => -2,
            Ttl::NoExpiry => -1,
            Ttl::Expires(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pttl_codes_round_trip() {
        for ms in [-2, -1, 0, 1, 30_000] {
            assert_eq!(Ttl::from_pttl(ms).as_pttl(), ms);
        }
        assert_eq!(Ttl::from_pttl(-7), Ttl::NoExpiry);
    }
}
