//! The crate's one error type.

use std::{fmt, time::Duration};

/// Result alias used throughout the crate.
///
/// ```
/// fn parse_lease(ms: u64) -> redisson_lock::Result<std::time::Duration> {
///     if ms == 0 {
///         return Err(redisson_lock::Error::InvalidArgument("zero lease".into()));
///     }
///     Ok(std::time::Duration::from_millis(ms))
/// }
/// assert!(parse_lease(0).is_err());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong with a lock operation.
///
/// One variant per case a caller handles differently; [`Error::kind`] gives the same distinction
/// as a plain value. Failures that come from Redis or the connection keep the underlying error,
/// reachable through [`std::error::Error::source`]. Messages never contain passwords or URLs.
///
/// ```
/// use redisson_lock::{Error, ErrorKind};
/// let e = Error::Timeout("Redis did not answer in time".into());
/// assert_eq!(e.kind(), ErrorKind::Timeout);
/// assert!(e.is_transient());
/// ```
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
    Timeout(Failure),
    /// The connection to Redis failed or was closed.
    Connection(Failure),
    /// An acquisition whose outcome is unknown: the request was (or may have been) sent, but no
    /// reply came (a command timeout, or the connection was lost). The caller holds nothing.
    /// If Redis did run the attempt, the crate undoes exactly that hold in the background
    /// (owner-checked, retried until done or until the hold would have expired), so the owner's
    /// hold count returns to what it was before the attempt. Transient: trying again is fine.
    Ambiguous(Failure),
    /// The Redis user lacks a permission the operation needs (ACL `NOPERM`).
    PermissionDenied(Failure),
    /// The lock was lost while the caller believed it held it (expired, deleted, force-unlocked).
    LockLost {
        /// The raw lock name in Redis.
        lock: String,
    },
    /// The client was shut down.
    Shutdown,
    /// Any other error reply or protocol problem from Redis.
    Redis(Failure),
    /// The lock was not acquired within the wait the caller allowed: another owner held it the
    /// whole time. Returned by the helpers that run code under a lock
    /// ([`Lock::try_run_for`](crate::Lock::try_run_for), `#[locked(wait = ..)]`); the `try_lock*`
    /// methods return `Ok(None)` instead.
    NotAcquired {
        /// The raw lock name in Redis.
        lock: String,
        /// How long the caller was willing to wait.
        wait: Duration,
    },
    /// On a Redis Cluster, the lock's derived keys (hash, channel, queue, timeout or token keys)
    /// would not all hash to one slot, so no script could touch them together (e.g. a name with
    /// an unclosed `{`). Refused before anything is sent.
    CrossSlot {
        /// The raw lock name in Redis.
        lock: String,
    },
    /// The TLS handshake failed: an untrusted or expired certificate, a certificate for another
    /// name, a server that does not speak TLS, or bad client TLS material. Not retried.
    Tls(Failure),
    /// Replica-synced acquisition ([`Config::check_lock_synced_replicas`](crate::Config::check_lock_synced_replicas),
    /// Redisson's `checkLockSyncedSlaves`): no replica acknowledged the acquisition within
    /// the sync timeout, so it was undone with the owner-checked release (a re-entrant owner's
    /// hold count is back where it was) and the caller holds nothing new. A waiting acquisition
    /// tries again up to [`retry_attempts`](crate::Config::retry_attempts) times (each after
    /// [`retry_delay`](crate::Config::retry_delay), within its wait) before returning it.
    /// Transient: a replica that lagged (e.g. during a failover) may acknowledge the next try.
    ///
    /// For the synchronizers, a semaphore acquisition is undone the same way (its permits given
    /// back); a release, set, add or drain that no replica acknowledged is **done on the
    /// master** and not undone or run again (Redisson's `NoSyncedSlavesException` after such a
    /// call means the same).
    NotReplicated {
        /// The raw lock name in Redis.
        lock: String,
        /// The master's replicas (those `online` in `INFO replication`); one acknowledgement
        /// would have sufficed.
        wanted: u64,
        /// Replicas that acknowledged in time.
        acked: u64,
    },
    /// A non-reentrant lock ([`NonReentrantLock`](crate::NonReentrantLock),
    /// [`NonReentrantFairLock`](crate::NonReentrantFairLock)) was acquired again by the owner
    /// that holds it. Answered at once, without waiting; nothing changed (the hold count stays
    /// 1, a fair lock's queue is untouched). Redisson throws `IllegalMonitorStateException`
    /// ("... is non-reentrant and is already held ..."); the script's error text carries the
    /// same marker, `NON_REENTRANT_REACQUIRE`.
    Reentry {
        /// The raw lock name in Redis.
        lock: String,
    },
    /// Lock events ([`Lock::events`](crate::Lock::events)) cannot be delivered: the server's
    /// `notify-keyspace-events` lacks what they need (`E` with `g` and `x`, or `A`); on a Redis
    /// Cluster, the setting of one of its masters (each is asked; the reason names the first
    /// that lacks them). Checked when the events are asked for, so a stream never silently
    /// stays empty.
    EventsUnavailable {
        /// The raw lock name in Redis.
        lock: String,
        /// Why: the setting found, and on a cluster the master (`host:port`) it is set on.
        reason: String,
    },
}

/// The kind of an [`Error`], as a plain value (for metrics, logs and protocol mappings).
///
/// ```
/// use redisson_lock::{Error, ErrorKind};
/// let e = Error::LockLost { lock: "orders".into() };
/// assert_eq!(e.kind(), ErrorKind::LockLost);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// [`Error::NotHeld`].
    NotHeld,
    /// [`Error::WrongType`].
    WrongType,
    /// [`Error::InvalidArgument`].
    InvalidArgument,
    /// [`Error::Timeout`].
    Timeout,
    /// [`Error::Connection`].
    Connection,
    /// [`Error::Ambiguous`].
    Ambiguous,
    /// [`Error::PermissionDenied`].
    PermissionDenied,
    /// [`Error::LockLost`].
    LockLost,
    /// [`Error::Shutdown`].
    Shutdown,
    /// [`Error::Redis`].
    Redis,
    /// [`Error::CrossSlot`].
    CrossSlot,
    /// [`Error::NotAcquired`].
    NotAcquired,
    /// [`Error::Tls`].
    Tls,
    /// [`Error::NotReplicated`].
    NotReplicated,
    /// [`Error::Reentry`].
    Reentry,
    /// [`Error::EventsUnavailable`].
    EventsUnavailable,
}

/// What went wrong talking to Redis: a message, and the underlying client error when there is
/// one (returned by [`std::error::Error::source`] of the [`Error`] that carries it). The
/// message says what happened here and leaves the client error's own text to it, so a report
/// that prints the chain (anyhow, eyre) says each once; [`Failure::details`] gives both in one
/// line.
///
/// ```
/// use redisson_lock::{Error, Failure};
/// let e = Error::Connection(Failure::new("connection reset"));
/// assert_eq!(e.to_string(), "connection error: connection reset");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    message: String,
    source: Option<fred::error::Error>,
}

impl Failure {
    /// A failure described by a message only.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    pub(crate) fn with_source(message: impl Into<String>, source: fred::error::Error) -> Self {
        Self {
            message: message.into(),
            source: Some(source),
        }
    }

    /// The description (without the client error's text: see [`details`](Self::details)).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The client error underneath, for the crate's own decisions on it.
    pub(crate) fn fred_error(&self) -> Option<&fred::error::Error> {
        self.source.as_ref()
    }

    /// The description and the client error's text, in one line (`message: text`).
    pub fn details(&self) -> String {
        match &self.source {
            Some(e) => format!("{}: {}", self.message, e.details()),
            None => self.message.clone(),
        }
    }
}

impl From<&str> for Failure {
    fn from(message: &str) -> Self {
        Failure::new(message)
    }
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure::new(message)
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl Error {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::NotHeld { .. } => ErrorKind::NotHeld,
            Error::WrongType { .. } => ErrorKind::WrongType,
            Error::InvalidArgument(_) => ErrorKind::InvalidArgument,
            Error::Timeout(_) => ErrorKind::Timeout,
            Error::Connection(_) => ErrorKind::Connection,
            Error::Ambiguous(_) => ErrorKind::Ambiguous,
            Error::PermissionDenied(_) => ErrorKind::PermissionDenied,
            Error::LockLost { .. } => ErrorKind::LockLost,
            Error::Shutdown => ErrorKind::Shutdown,
            Error::Redis(_) => ErrorKind::Redis,
            Error::CrossSlot { .. } => ErrorKind::CrossSlot,
            Error::NotAcquired { .. } => ErrorKind::NotAcquired,
            Error::Tls(_) => ErrorKind::Tls,
            Error::NotReplicated { .. } => ErrorKind::NotReplicated,
            Error::Reentry { .. } => ErrorKind::Reentry,
            Error::EventsUnavailable { .. } => ErrorKind::EventsUnavailable,
        }
    }

    /// `true` for errors that may go away on retry (timeouts, connection failures, ambiguous
    /// acquisitions, and acquisitions no replica acknowledged, which were undone).
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Error::Timeout(_)
                | Error::Connection(_)
                | Error::Ambiguous(_)
                | Error::NotReplicated { .. }
        )
    }

    /// The ambiguous form of a transient failure of an acquisition attempt on `lock`.
    pub(crate) fn into_ambiguous(self, lock: &str) -> Error {
        let (what, failure) = match self {
            Error::Timeout(f) => ("no reply in time", f),
            Error::Connection(f) => ("connection lost", f),
            other => return other,
        };
        Error::Ambiguous(Failure {
            message: format!(
                "acquisition of lock '{lock}' may or may not have been executed ({what}: {}); \
                 it is undone in the background if it was",
                failure.message
            ),
            source: failure.source,
        })
    }

    /// Maps a fred error, naming the lock it concerned.
    pub(crate) fn from_redis(err: fred::error::Error, lock: &str) -> Error {
        use fred::error::ErrorKind as K;
        let details = err.details().to_owned();
        if details.contains("WRONGTYPE") {
            return Error::WrongType {
                lock: lock.to_owned(),
            };
        }
        if details.contains(REENTRY_MARKER) {
            return Error::Reentry {
                lock: lock.to_owned(),
            };
        }
        // Each message says what happened here; fred's own text is the source's (printed once
        // by an error report that walks the chain).
        if details.contains("NOPERM") || matches!(err.kind(), K::Auth) {
            return Error::PermissionDenied(Failure::with_source("refused by the server", err));
        }
        if is_tls_kind(&err) || is_tls_failure(&details) {
            return Error::Tls(Failure::with_source("TLS handshake failed", err));
        }
        match err.kind() {
            K::Timeout => Error::Timeout(Failure::with_source("Redis did not answer in time", err)),
            K::IO | K::Canceled | K::Sentinel => {
                Error::Connection(Failure::with_source("the connection failed", err))
            }
            // fred gave up writing the command because its connection was closing or being
            // replaced (e.g. as stalled): a connection failure, transient like the others.
            K::Unknown if details.contains("Too many failed write attempts") => Error::Connection(
                Failure::with_source("the command could not be written", err),
            ),
            // fred had no connection to route the command to (being reconnected, or the node
            // of its slot not known yet): nothing was written; transient as well.
            K::Routing => Error::Connection(Failure::with_source("no connection to send on", err)),
            K::Unknown if details.contains("Failed to route command") => {
                Error::Connection(Failure::with_source("no connection to send on", err))
            }
            _ => Error::Redis(Failure::with_source(
                "the server replied with an error",
                err,
            )),
        }
    }
}

/// The error text the non-reentrant acquire scripts reply with when the holder acquires again
/// (Redisson's marker, recognised anywhere in the error text).
pub(crate) const REENTRY_MARKER: &str = "NON_REENTRANT_REACQUIRE";

#[cfg(feature = "tls")]
fn is_tls_kind(err: &fred::error::Error) -> bool {
    matches!(err.kind(), fred::error::ErrorKind::Tls)
}

#[cfg(not(feature = "tls"))]
fn is_tls_kind(_: &fred::error::Error) -> bool {
    false
}

/// `true` for the texts rustls gives when a handshake fails (fred passes them on as I/O errors).
fn is_tls_failure(details: &str) -> bool {
    [
        // rustls's errors, by Display and by Debug (fred passes the Debug form of the I/O error).
        "invalid peer certificate",
        "InvalidCertificate(",
        "received corrupt message",
        "InvalidMessage(",
        "InvalidContentType",
        "peer is incompatible",
        "PeerIncompatible(",
        "PeerMisbehaved(",
        "received fatal alert",
        "AlertReceived(",
        "InappropriateHandshakeMessage",
        "InappropriateMessage",
        "NoCertificatesPresented",
        "invalid dnsname",
    ]
    .iter()
    .any(|needle| details.contains(needle))
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
            Error::Ambiguous(m) => write!(f, "ambiguous acquisition: {m}"),
            Error::PermissionDenied(m) => write!(f, "permission denied: {m}"),
            Error::LockLost { lock } => write!(f, "lock '{lock}' was lost"),
            Error::Shutdown => write!(f, "the client was shut down"),
            Error::Redis(m) => write!(f, "redis error: {m}"),
            Error::CrossSlot { lock } => write!(
                f,
                "the keys of lock '{lock}' do not hash to one cluster slot (check its braces)"
            ),
            Error::NotAcquired { lock, wait } => {
                write!(f, "lock '{lock}' was not acquired within {wait:?}")
            }
            Error::Tls(m) => write!(f, "TLS error: {m}"),
            Error::NotReplicated {
                lock,
                wanted,
                acked,
            } => write!(
                f,
                "acquisition of lock '{lock}' was undone: {acked} of {wanted} replicas \
                 acknowledged it within the sync timeout"
            ),
            Error::EventsUnavailable { lock, reason } => {
                write!(f, "no events of lock '{lock}' can be delivered: {reason}")
            }
            Error::Reentry { lock } => write!(
                f,
                "lock '{lock}' is non-reentrant and is already held by this owner \
                 ({REENTRY_MARKER})"
            ),
        }?;
        // `{:#}` adds the source's text (the crate's own logs use it): one line with both.
        match (f.alternate(), std::error::Error::source(self)) {
            (true, Some(source)) => write!(f, ": {source}"),
            _ => Ok(()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Timeout(f)
            | Error::Connection(f)
            | Error::Ambiguous(f)
            | Error::PermissionDenied(f)
            | Error::Tls(f)
            | Error::Redis(f) => f
                .source
                .as_ref()
                .map(|e| e as &(dyn std::error::Error + 'static)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

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
    fn a_write_fred_gave_up_on_is_a_connection_failure() {
        let e = fred::error::Error::new(
            fred::error::ErrorKind::Unknown,
            "Too many failed write attempts.",
        );
        let mapped = Error::from_redis(e, "k");
        assert_eq!(mapped.kind(), ErrorKind::Connection);
        assert!(mapped.is_transient());
    }

    /// fred answers this when the connection a command must go to is being reconnected (seen
    /// on a `lock()` sent while a proxy reset the connection): a connection failure, so a waiting
    /// acquisition goes on instead of ending with a Redis error.
    #[test]
    fn a_command_fred_could_not_route_is_a_connection_failure() {
        for kind in [
            fred::error::ErrorKind::Unknown,
            fred::error::ErrorKind::Routing,
        ] {
            let e = fred::error::Error::new(kind, "Failed to route command.");
            let mapped = Error::from_redis(e, "k");
            assert_eq!(mapped.kind(), ErrorKind::Connection);
            assert!(mapped.is_transient());
        }
    }

    #[test]
    fn timeouts_are_transient_and_keep_their_source() {
        let e = fred::error::Error::new(fred::error::ErrorKind::Timeout, "x");
        let mapped = Error::from_redis(e.clone(), "k");
        assert!(mapped.is_transient());
        assert_eq!(mapped.kind(), ErrorKind::Timeout);
        let source = mapped.source().expect("the fred error is kept");
        assert_eq!(source.to_string(), e.to_string());
    }

    #[test]
    fn noperm_is_permission_denied() {
        let e = fred::error::Error::new(
            fred::error::ErrorKind::Unknown,
            "NOPERM this user has no permissions to access one of the channels",
        );
        let mapped = Error::from_redis(e, "k");
        assert_eq!(mapped.kind(), ErrorKind::PermissionDenied);
        assert!(
            !mapped.to_string().contains("NOPERM"),
            "said once, by the source"
        );
        assert!(mapped.source().unwrap().to_string().contains("NOPERM"));
        let Error::PermissionDenied(f) = &mapped else {
            unreachable!()
        };
        assert!(f.details().contains("NOPERM"), "both in one line");
    }

    /// An error report that walks the chain (anyhow, eyre) says fred's text once.
    #[test]
    fn a_chain_says_the_client_errors_text_once() {
        let text = "connection reset by peer (os error 104)";
        let e = Error::from_redis(
            fred::error::Error::new(fred::error::ErrorKind::IO, text),
            "k",
        );
        let mut chain = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            chain.push_str(&format!(" / {c}"));
            cause = c.source();
        }
        assert_eq!(chain.matches(text).count(), 1, "{chain}");
    }

    #[test]
    fn errors_without_a_redis_cause_have_no_source() {
        assert!(Error::InvalidArgument("x".into()).source().is_none());
        assert!(Error::Timeout("waited".into()).source().is_none());
        assert_eq!(Error::Shutdown.kind(), ErrorKind::Shutdown);
    }

    #[test]
    fn the_reentry_marker_maps_to_reentry_wherever_it_is() {
        for text in [
            "ERR NON_REENTRANT_REACQUIRE",
            "NON_REENTRANT_REACQUIRE",
            "ERR Error running script (call to f_x): NON_REENTRANT_REACQUIRE",
        ] {
            let e = fred::error::Error::new(fred::error::ErrorKind::Unknown, text);
            let mapped = Error::from_redis(e, "k");
            assert_eq!(mapped, Error::Reentry { lock: "k".into() }, "{text}");
            assert_eq!(mapped.kind(), ErrorKind::Reentry);
            assert!(!mapped.is_transient(), "answered at once, never retried");
            assert!(mapped.to_string().contains("NON_REENTRANT_REACQUIRE"));
        }
    }

    #[test]
    fn not_replicated_names_the_lock_and_the_replicas() {
        let e = Error::NotReplicated {
            lock: "orders".into(),
            wanted: 2,
            acked: 0,
        };
        assert_eq!(e.kind(), ErrorKind::NotReplicated);
        assert!(e.is_transient(), "undone; trying again is fine");
        assert!(e.source().is_none());
        let shown = e.to_string();
        assert!(
            shown.contains("'orders'") && shown.contains("0 of 2 replicas"),
            "{shown}"
        );
    }
}
