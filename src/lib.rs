//! # redisson-lock
//!
//! Distributed locks on Redis, wire-compatible with Java [Redisson]'s lock protocol: a Rust task
//! and a Java thread using the same lock name exclude each other, and an unlock on either side
//! wakes waiters on the other side at once. (Compatible with Redisson's protocol; not affiliated
//! with the Redisson project.)
//!
//! * [`Client`]: one per application; owns the connections, the script registry, the
//!   subscription registry and the watchdog.
//! * [`Lock<K>`](Lock): one generic lock handle for every kind `K`, with aliases for each:
//!   [`RLock`] (reentrant), [`FairLock`], [`ReadWriteLock`] ([`ReadLock`], [`WriteLock`]),
//!   [`FencedLock`], [`SpinLock`], [`NonReentrantLock`], [`NonReentrantFairLock`], [`GroupLock`]
//!   (a set of values of one group, all or none).
//!   [`Guard<K>`](Guard): one hold, released on drop.
//! * [`MultiLock`] (all of several locks) and [`RedLock`] (a quorum of independent masters).
//! * Recipes: [`Election`] (leader election on the fenced lock, [`Client::get_election`]),
//!   [`Client::run_once`] (run-once jobs, ShedLock's semantics) with [`assert_locked`].
//! * [`blocking`]: the same API for synchronous code, owned by the calling OS thread.
//!
//! ```no_run
//! # async fn demo() -> redisson_lock::Result<()> {
//! use std::time::Duration;
//! use redisson_lock::{Client, Config};
//!
//! let client = Client::connect("redis://127.0.0.1:6379", Config::default()).await?;
//! let lock = client.get_lock("orders");
//! let guard = lock.lock().await?;
//! tokio::select! {
//!     _ = guard.lost() => eprintln!("lock lost, stopping"),
//!     _ = tokio::time::sleep(Duration::from_secs(1)) => {} // the work
//! }
//! guard.unlock().await?;
//! # Ok(()) }
//! ```
//!
//! [Redisson]: https://redisson.org
#![deny(missing_docs)]
#![forbid(unsafe_code)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod acquisitions;
#[cfg(feature = "blocking")]
#[cfg_attr(docsrs, doc(cfg(feature = "blocking")))]
pub mod blocking;
mod client;
mod config;
mod conn;
mod engine;
mod error;
mod lock;
mod observe;
mod recipes;
mod service;
mod sync;
mod types;

pub use client::{Client, ShutdownReport};
pub use config::{
    credentials::{Credentials, Secret},
    Config, LocalHandOff, NameMapper, PrefixNameMapper, ShardedSubscriptionMode, TlsSettings,
};
pub use error::{Error, ErrorKind, Failure, Result};
/// The fred crate this one is built on (its 10.x line), for
/// [`Client::connect_with_fred`]'s configuration.
#[cfg(feature = "fred-10")]
#[cfg_attr(docsrs, doc(cfg(feature = "fred-10")))]
pub use fred;
pub use lock::{
    AnyGuard, AnyKind, BackOff, Fair, FairGuard, FairLock, Fenced, FencedGuard, FencedLock, Group,
    GroupGuard, GroupLock, Guard, Holder, Holders, Kind, Lock, LockEvent, LockEvents, LockGuard,
    LockPart, MultiGuard, MultiLock, NonReentrant, NonReentrantFair, NonReentrantFairGuard,
    NonReentrantFairLock, NonReentrantGuard, NonReentrantLock, RLock, Read, ReadGuard, ReadLock,
    ReadWriteLock, RedLock, RedLockGuard, RedLockOptions, Reentrant, Spin, SpinGuard, SpinLock,
    UnlockOutcome, Write, WriteGuard, WriteLock,
};
pub use recipes::{
    election::{Election, Leader, LeaderWatch, Leadership, DEFAULT_OBSERVE_POLL},
    run_once::RunOnce,
    watch::{assert_locked, HoldWatch},
};
pub use service::watchdog::HoldState;
pub use sync::{
    CountDownLatch, PermitExpirableSemaphore, PermitGuard, RCountDownLatch,
    RPermitExpirableSemaphore, RSemaphore, Semaphore, SemaphorePermits,
};
pub use types::{
    millis::MAX_MILLIS,
    owner::Owner,
    permit::{ParsePermitIdError, PermitId},
    stats::Stats,
    ttl::Ttl,
};

/// Support for the `redisson-lock` binary (feature `cli`). Not part of the stable API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub mod cli_support {
    /// The connection-library configuration a [`Client`](crate::Client) would use for `url`
    /// and `config`: the URL checked as [`Client::connect`](crate::Client::connect) checks it
    /// (a TLS URL never connects in plain text), credentials, database and TLS applied.
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) for a bad URL or configuration.
    pub fn fred_config(
        url: &str,
        config: &crate::Config,
    ) -> crate::Result<fred::types::config::Config> {
        crate::conn::connect::fred_config_for_url(url, config)
    }
}

/// Runs an `async fn` under a distributed lock, like the lock annotations Java services put on
/// methods. (Feature `macros`, on by default.)
///
/// ```no_run
/// use redisson_lock::{locked, Client};
///
/// #[derive(Debug)]
/// enum AppError {
///     Lock(redisson_lock::Error),
///     OutOfStock,
/// }
/// impl From<redisson_lock::Error> for AppError {
///     fn from(e: redisson_lock::Error) -> Self {
///         AppError::Lock(e)
///     }
/// }
///
/// struct Orders {
///     client: Client,
/// }
///
/// impl Orders {
///     #[locked(client = &self.client, name = "orders:{id}", wait = "5s", lease = "30s", kind = fair)]
///     async fn ship(&self, id: u64, qty: u32) -> Result<u32, AppError> {
///         // Runs while this process holds the fair lock "orders:<id>".
///         if qty == 0 {
///             return Err(AppError::OutOfStock);
///         }
///         Ok(qty)
///     }
/// }
/// ```
///
/// The function must be an `async fn` returning `Result<T, E>` with
/// `E: From<redisson_lock::Error>`: lock failures are returned through `E::from`. The body does
/// not change; the attribute builds the lock, then calls [`Lock::run`] and its variants (all the
/// logic is there; code that cannot use an attribute calls them directly).
///
/// | argument | meaning | if left out |
/// |---|---|---|
/// | `client = expr` | an expression giving `&Client` (deref coercion applies, so `&Arc<Client>` works); it may use the arguments, e.g. `&self.client` | required |
/// | `name = "orders:{id}"` | the lock name; `{arg}` or `{arg.field}` inserts an argument (with `Display`); `{{` and `}}` are literal braces (a cluster hash tag is `"{{orders}}:{id}"`) | required |
/// | `wait = "5s"` | how long to wait for the lock; then the call returns [`Error::NotAcquired`] and the body does not run (`"0s"`: one attempt) | wait without limit |
/// | `lease = "30s"` | hold the lock at most this long (no watchdog); a body still running when it runs out is dropped and the call returns [`Error::LockLost`] | the watchdog renews the lock while the body runs, honouring [`Config::max_renewals`] |
/// | `kind = fair` | `reentrant`, `fair`, `fenced`, `spin`, `non_reentrant`, `non_reentrant_fair` (the same locks on the wire as `reentrant` and `fair`; every call has its own owner, so a call never re-enters either way), `read` or `write` (a half of the read-write lock of that name) | `reentrant` |
///
/// Durations are strings with units (`"500ms"`, `"5s"`, `"2m"`, `"1h"`, `"1m30s"`) or any
/// expression of type `Duration`.
///
/// Every call takes a fresh [`Owner`], so two calls exclude each other even inside one task, and
/// a call does not re-enter a lock its caller holds through another handle. If the lock is lost
/// while the body runs (renewal found it gone, it was force-unlocked, the lease ran out, or
/// renewal stopped at `max_renewals`), the body's future is dropped at once and the call returns
/// [`Error::LockLost`]. When the body ends, its result is returned and the lock is released
/// before the call returns.
///
/// Mistakes in the arguments are compile errors that say what is wrong: an unknown key, a
/// duration without a unit, a `{field}` that is not an argument, a missing `client` or `name`, a
/// function that is not `async` or does not return a `Result`.
///
/// # Errors
/// Whatever the body returns; the acquisition's errors, [`Error::NotAcquired`] and
/// [`Error::LockLost`] through `E::from`.
///
/// # Cancel safety
/// As [`Lock::run`]: dropping the call's future while it waits leaves nothing behind; while the
/// body runs, it drops the body and releases the lock in the background.
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use redisson_lock_macros::locked;

/// Runs an `async fn` at most once at a time across every instance, Rust or Java, that runs it
/// under the same name (ShedLock's `@SchedulerLock`): what
/// [`Client::run_once`] does, as an attribute. (Feature `macros`.)
///
/// ```no_run
/// use redisson_lock::{run_once, Client};
///
/// struct Billing {
///     client: Client,
/// }
///
/// impl Billing {
///     #[run_once(client = &self.client, name = "invoices:{day}", at_least = "30s", at_most = "10m")]
///     async fn send_invoices(&self, day: u32) -> Result<u32, redisson_lock::Error> {
///         redisson_lock::assert_locked()?; // held: do the side effect
///         Ok(day)
///     }
/// }
/// ```
///
/// | argument | meaning | if left out |
/// |---|---|---|
/// | `client`, `name` | as for [`locked`] | required |
/// | `at_most = "10m"` | the job's future is dropped at this long after the start, the name released, and the call returns [`Error::LockLost`] | required |
/// | `at_least = "30s"` | a job that ends sooner keeps the name held until then (by its TTL) | zero |
///
/// A name held by another instance returns [`Error::NotAcquired`] at once (the body does not
/// run). The function must be an `async fn` returning `Result<T, E>` with
/// `E: From<redisson_lock::Error>`.
///
/// # Errors
/// As above, and what the body returns.
///
/// # Cancel safety
/// As [`Client::run_once`].
#[cfg(feature = "macros")]
#[cfg_attr(docsrs, doc(cfg(feature = "macros")))]
pub use redisson_lock_macros::run_once;

/// The README's Rust snippets, compiled as doc tests so they cannot drift from the API.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// The guide's pages (`docs/*.md`), compiled as doc tests like the README: one item per page
/// (`tests/docs_links.rs` checks that every page is listed here).
#[cfg(doctest)]
pub mod guide_doctests {
    #[doc = include_str!("../docs/README.md")]
    pub struct Index;
    #[doc = include_str!("../docs/beside-other-clients.md")]
    pub struct BesideOtherClients;
    #[doc = include_str!("../docs/locks.md")]
    pub struct Locks;
    #[doc = include_str!("../docs/synchronizers.md")]
    pub struct Synchronizers;
    #[doc = include_str!("../docs/recipes.md")]
    pub struct Recipes;
    #[doc = include_str!("../docs/cluster.md")]
    pub struct Cluster;
    #[doc = include_str!("../docs/sentinel-tls.md")]
    pub struct SentinelTls;
    #[doc = include_str!("../docs/java.md")]
    pub struct Java;
    #[doc = include_str!("../docs/safety.md")]
    pub struct Safety;
    #[doc = include_str!("../docs/faults.md")]
    pub struct Faults;
    #[doc = include_str!("../docs/performance.md")]
    pub struct Performance;
    #[doc = include_str!("../docs/observability.md")]
    pub struct Observability;
    #[doc = include_str!("../docs/cli.md")]
    pub struct Cli;
    #[doc = include_str!("../docs/PROTOCOL.md")]
    pub struct Protocol;
    #[doc = include_str!("../docs/MSRV.md")]
    pub struct Msrv;
    #[doc = include_str!("../docs/testing.md")]
    pub struct Testing;
}

/// Used by the code `#[locked]` generates; not part of the API.
#[doc(hidden)]
pub mod __private {
    use std::future::Future;

    /// Names the output type of the locked body, so `?` inside it knows its error type.
    pub fn body<R, F: Future<Output = R>>(body: F) -> F {
        body
    }

    /// What `#[run_once]` expands to: [`Client::run_once`](crate::Client::run_once) with its
    /// outcome folded into the function's `Result`: skipped → `NotAcquired` (wait zero), cut
    /// at `at_most` → `LockLost`.
    pub async fn run_once<T, E, F, Fut>(
        client: &crate::Client,
        name: &str,
        at_least: std::time::Duration,
        at_most: std::time::Duration,
        body: F,
    ) -> Result<T, E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
        E: From<crate::Error>,
    {
        match client.run_once(name, at_least, at_most, |_| body()).await {
            Ok(crate::RunOnce::Ran(result)) => result,
            Ok(crate::RunOnce::Skipped) => Err(E::from(crate::Error::NotAcquired {
                lock: client.map_name(name),
                wait: std::time::Duration::ZERO,
            })),
            Ok(_) => Err(E::from(crate::Error::LockLost {
                lock: client.map_name(name),
            })),
            Err(e) => Err(E::from(e)),
        }
    }
}
