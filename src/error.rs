//! The crate's one error type.

use std::fmt;

/// Result alias used throughout the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong with a lock operation.
///
/// One variant per case a caller handles differently. Messages never contain passwords or URLs.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// The caller is not the owner of the lock: it never held it, released it already, or the lock
    /// expired or was force-unlocked. Redisson throws `IllegalMonitorStateException` here.
    NotHeld {
        /// The raw lock name in Redis.
        lock: String,
        /// The owner field (`<client uuid>:<owner id>`) that tried to release.
        owner: String,
    },
    /// The lock's key (or a key it needs) holds another Redis type; nothing was changed.
    WrongType {
        /// The raw lock name in Redis.
        lock: String,
    },
    /// A bad argument, rejected before anything was sent to Redis.
    InvalidArgument(String),
    /// A command, the subscription or a wait ran out of time. An acquisition that timed out may
    /// still have been executed by Redis; the crate releases such a hold when it learns of it.
    Timeout(String),
    /// The connection to Redis failed or was closed.
    Connection(String),
    /// The Redis user lacks a permission the operation needs (ACL `NOPERM`).
    PermissionDenied(String),
    /// The lock was lost while the caller believed it held it (expired, deleted, force-unlocked).
    LockLost {
        /// The raw lock name in Redis.
        lock: String,
    },
    /// The client was shut down.
    Shutdown,
    /// Any other error reply or protocol problem from Redis.
    Redis(String),
}

impl Error {
    /// `true` for errors that may go away on retry (timeouts and connection failures).
    pub fn is_transient(&self) -> bool {
        matches!(self, Error::Timeout(_) | Error::Connection(_))
    }

    /// The one-word kind used by the `lock-peer` protocol (`NOT_HELD`, `WRONG_TYPE`, ...).
    pub fn kind_word(&self) -> &'static str {
        match self {
            Error::NotHeld { .. } => "NOT_HELD",
            Error::WrongType { .. } => "WRONG_TYPE",
            Error::InvalidArgument(_) => "INVALID",
            Error::Timeout(_) => "TIMEOUT",
            Error::Connection(_) => "CONNECTION",
            Error::PermissionDenied(_) => "NO_PERMISSION",
            Error::LockLost { .. } => "LOCK_LOST",
            Error::Shutdown => "SHUTDOWN",
            Error::Redis(_) => "REDIS",
        }
    }

    /// Maps a fred error, naming the lock it concerned.
    pub(crate) fn from_redis(err: fred::error::Error, lock: &str) -> Error {
        use fred::error::ErrorKind;
        let details = err.details();
        if details.contains("WRONGTYPE") {
            return Error::WrongType {
                lock: lock.to_owned(),
            };
        }
        if details.contains("NOPERM") || matches!(err.kind(), ErrorKind::Auth) {
            return Error::PermissionDenied(details.to_owned());
        }
        match err.kind() {
            ErrorKind::Timeout => {
                Error::Timeout(format!("Redis did not answer in time: {details}"))
            }
            ErrorKind::IO | ErrorKind::Canceled => Error::Connection(details.to_owned()),
            _ => Error::Redis(details.to_owned()),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotHeld { lock, owner } => write!(
                f,
                "attempt to unlock lock '{lock}', not locked by current owner {owner}"
            ),
            Error::WrongType { lock } => write!(
                f,
                "key '{lock}' holds another Redis type than the lock needs (WRONGTYPE)"
            ),
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::Timeout(m) => write!(f, "timeout: {m}"),
            Error::Connection(m) => write!(f, "connection error: {m}"),
            Error::PermissionDenied(m) => write!(f, "permission denied: {m}"),
            Error::LockLost { lock } => write!(f, "lock '{lock}' was lost"),
            Error::Shutdown => write!(f, "the client was shut down"),
            Error::Redis(m) => write!(f, "redis error: {m}"),
        }
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrongtype_replies_map_to_wrong_type() {
        let e = fred::error::Error::new(
            fred::error::ErrorKind::Unknown,
            "ERR Error running script: WRONGTYPE Operation against a key",
        );
        assert_eq!(
            Error::from_redis(e, "k"),
            Error::WrongType { lock: "k".into() }
        );
    }

    #[test]
    fn timeouts_are_transient() {
        let e = fred::error::Error::new(fred::error::ErrorKind::Timeout, "x");
        assert!(Error::from_redis(e, "k").is_transient());
        assert_eq!(Error::Timeout("x".into()).kind_word(), "TIMEOUT");
    }
}
