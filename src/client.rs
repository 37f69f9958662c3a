//! The client: one [`Core`] (command connection, scripts, settings), the background services
//! (subscription registry, renewal service, unlock-receipt clean-up, restarts) and the
//! per-client acquisition state, shared by every lock it hands out. The `get_*` lock factories
//! live beside their kinds in `lock/kinds/`, so this module knows no kind.

use std::{
    collections::BTreeMap,
    future::Future,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
};

use crate::{
    acquisitions::{
        ledger::{Ledgers, SWEEP_EVERY},
        line::WaitLines,
        pending::PendingReleases,
        Acquisitions,
    },
    config::Config,
    conn::{connect::Target, core::Core},
    error::Result,
    service::{
        failover::Failovers, pubsub::PubSub, restarts::Restarts, unlock_receipts::ReceiptSweeper,
        watchdog::Watchdog,
    },
    types::{line::WaitLine, owner::Owner, stats::Stats},
};

pub(crate) struct ClientInner {
    core: Arc<Core>,
    pubsub: PubSub,
    watchdog: Watchdog,
    /// Sentinel: the sentinels' failover events (nothing elsewhere).
    failovers: Failovers,
    receipts: ReceiptSweeper,
    acquisitions: Acquisitions,
    restarts: Restarts,
    runtime: tokio::runtime::Handle,
    /// Set when `shutdown` begins: nothing new is acquired or waited for.
    closed: AtomicBool,
    /// Set when `shutdown` has closed the connections: nothing is sent any more (releases
    /// handed over before then are sent until it).
    stopped: AtomicBool,
}

/// Drops the owner-ledger entries that can no longer matter (see `ledger`), every
/// [`SWEEP_EVERY`] while the client lives.
async fn sweep_ledger(inner: std::sync::Weak<ClientInner>) {
    loop {
        tokio::time::sleep(SWEEP_EVERY).await;
        let Some(inner) = inner.upgrade() else {
            return;
        };
        if inner.closed.load(Ordering::Acquire) {
            return;
        }
        let now = tokio::time::Instant::now();
        inner
            .acquisitions
            .ledgers
            .sweep(now, |key| inner.watchdog.renews(key));
    }
}

impl Drop for ClientInner {
    fn drop(&mut self) {
        let core = self.core.clone();
        drop(self.runtime.spawn(async move { core.quit().await }));
    }
}

/// What [`Client::shutdown`] did with what was left.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ShutdownReport {
    /// Releases of dropped guards (and orphaned acquisitions) not sent before the shutdown
    /// timeout: their locks expire after their lease or one watchdog timeout.
    pub unsent: usize,
    /// Holds of guards still held at shutdown, kept (not released, no longer renewed, their
    /// guards told `Lost`).
    pub kept: usize,
}

/// A connection to Redis that hands out locks. Cheap to clone; create one per application.
///
/// The client id is a random lowercase v4 UUID, the first half of every owner field it writes.
///
/// ```no_run
/// # async fn demo() -> redisson_lock::Result<()> {
/// use redisson_lock::{Client, Config};
///
/// let client = Client::connect("redis://127.0.0.1:6379", Config::default()).await?;
/// let lock = client.get_lock("orders");
/// let guard = lock.lock().await?; // waits; the watchdog keeps it alive
/// // ... critical section ...
/// guard.unlock().await?; // or just drop the guard
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Client {
    inner: Arc<ClientInner>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("id", &self.id()).finish()
    }
}

impl Client {
    /// Connects to the Redis server at `url` (`redis://[user:password@]host:port[/db]`,
    /// `rediss://` for TLS with the `tls` feature), to a Redis Cluster with
    /// `redis-cluster://host:port[?node=host:port...]`, or through Sentinel with
    /// `redis-sentinel://host:26379?sentinelServiceName=MASTER[&node=host:port...]`. Any other
    /// scheme is refused with [`InvalidArgument`](crate::Error::InvalidArgument).
    ///
    /// Must be called inside a Tokio runtime; the client's background tasks run on it.
    ///
    /// # Errors
    /// [`InvalidArgument`](crate::Error::InvalidArgument) for a bad URL or configuration, a
    /// connection error if the server cannot be reached within the connect timeout,
    /// [`PermissionDenied`](crate::Error::PermissionDenied) for refused credentials.
    ///
    /// # Cancel safety
    /// If the future is dropped, the connections made so far are closed and nothing is left.
    pub async fn connect(url: &str, config: Config) -> Result<Client> {
        Self::start(&[url], config).await
    }

    /// Connects to a Redis Cluster through some of its nodes (Redisson's
    /// `useClusterServers().addNodeAddress(...)`): each seed is a `redis://host:port` URL (the
    /// first one's user, password and options apply to every node); one reachable seed is
    /// enough, the rest of the cluster is discovered. A single `redis-cluster://` URL given to
    /// [`connect`](Self::connect) does the same.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    ///
    /// # Cancel safety
    /// As [`connect`](Self::connect).
    pub async fn connect_cluster(seeds: &[&str], config: Config) -> Result<Client> {
        if seeds.len() == 1 {
            let url = seeds[0].replacen("redis://", "redis-cluster://", 1);
            return Self::start(&[&url], config).await;
        }
        Self::start(seeds, config).await
    }

    /// Connects through Redis Sentinel (Redisson's `useSentinelServers()`): `master` is the
    /// monitored master's name, each sentinel a `redis://host:port` URL (`rediss://` for TLS; a
    /// user and password in them are the sentinels' own, as
    /// [`Config::sentinel_password`](crate::Config::sentinel_password)). The data nodes'
    /// credentials and database come from the [`Config`]
    /// ([`password`](crate::Config::password), [`username`](crate::Config::username),
    /// [`database`](crate::Config::database)).
    ///
    /// The client asks the sentinels for the master, checks its role, and listens to every
    /// listed sentinel's failover events: from a failover's start until the switch, its holds
    /// are in doubt (see [`HoldState`](crate::HoldState)) and lock commands wait (at most the
    /// command timeout); at the switch it reconnects to the new master (commands, renewals,
    /// releases, the subscriber and the replica-sync connections) even if the old one is still
    /// up, and the holds are confirmed there or lost. A
    /// `READONLY` reply from a demoted master is retried on the new one (a lock script that got
    /// it wrote nothing). A single `redis-sentinel://s1:26379?sentinelServiceName=M&node=s2:26379`
    /// URL given to [`connect`](Self::connect) does the same.
    ///
    /// # Errors
    /// As [`connect`](Self::connect).
    ///
    /// # Cancel safety
    /// As [`connect`](Self::connect).
    pub async fn connect_sentinel(
        master: &str,
        sentinels: &[&str],
        config: Config,
    ) -> Result<Client> {
        Self::start_target(Target::Sentinel { master, sentinels }, config).await
    }

    /// Connects with a fred configuration the application already has (feature `fred-10`,
    /// which follows fred's major version): its deployment (a server, a cluster, Sentinel),
    /// TLS, credentials and database are used as they are; the [`Config`]'s credentials and
    /// database override them where set. The client opens its own command and subscriber
    /// connections from it, with its own policies: a lock script is never re-sent by the
    /// transport, cluster redirections are followed by the crate, its timeouts apply. (A fred
    /// *client* cannot be shared for that reason: its re-send and redirection settings would
    /// be wrong for lock scripts.)
    ///
    /// ```no_run
    /// # async fn demo() -> redisson_lock::Result<()> {
    /// use redisson_lock::{fred, Client, Config};
    /// let service = fred::types::config::Config::from_url("redis://127.0.0.1:6379").unwrap();
    /// let locks = Client::connect_with_fred(&service, Config::default()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`connect`](Self::connect); [`InvalidArgument`](crate::Error::InvalidArgument) when
    /// [`Config::tls`](crate::Config::tls) is set beside it (TLS is the fred configuration's).
    ///
    /// # Cancel safety
    /// As [`connect`](Self::connect).
    #[cfg(feature = "fred-10")]
    #[cfg_attr(docsrs, doc(cfg(feature = "fred-10")))]
    pub async fn connect_with_fred(
        fred: &fred::types::config::Config,
        config: Config,
    ) -> Result<Client> {
        Self::start_target(Target::Fred(fred), config).await
    }

    async fn start(urls: &[&str], config: Config) -> Result<Client> {
        Self::start_target(Target::Urls(urls), config).await
    }

    async fn start_target(target: Target<'_>, config: Config) -> Result<Client> {
        crate::observe::describe();
        let (core, sub) = Core::connect(target, config).await?;

        let core = Arc::new(core);
        let acquisitions = Acquisitions::new(core.config().local_hand_off);
        // A hold the watchdog finds gone frees the lock without an unlock message: the local
        // queue's head is told at once.
        let gone = {
            let lines = acquisitions.lines.clone();
            Box::new(move |name: &str, line: WaitLine| lines.released(line, name, true, None))
        };
        let watchdog = Watchdog::start(core.clone(), gone);
        let failovers = Failovers::start(&core, watchdog.failover_holds(), sub.clone());
        let inner = ClientInner {
            pubsub: PubSub::start(sub, &core),
            watchdog,
            failovers,
            receipts: ReceiptSweeper::start(core.clone()),
            acquisitions,
            restarts: Restarts::start(core.clone()).await,
            core,
            runtime: tokio::runtime::Handle::current(),
            closed: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        };
        let inner = Arc::new(inner);
        drop(inner.runtime.spawn(sweep_ledger(Arc::downgrade(&inner))));
        Ok(Client { inner })
    }

    /// This client's id: the `<client uuid>` part of every owner field.
    pub fn id(&self) -> &str {
        self.inner.core.id()
    }

    /// The configuration the client was built with.
    pub fn config(&self) -> &Config {
        self.inner.core.config()
    }

    /// A snapshot of this client's held watchdog locks, renewals, subscriptions, waiters, wait
    /// lines, owner entries and background releases: each goes back to zero once nothing is
    /// held, awaited or being released.
    pub fn stats(&self) -> Stats {
        let mut channels: BTreeMap<String, usize> = self.inner.pubsub.channel_waiters().collect();
        // Waiters queued behind a local head share its one subscription.
        for (channel, queued) in self.inner.acquisitions.lines.queued_beyond_subscriptions() {
            *channels.entry(channel).or_default() += queued;
        }
        Stats {
            watchdog_holds: self.inner.watchdog.len(),
            renewal_calls: self.inner.watchdog.renew_calls(),
            subscribed_channels: self.inner.pubsub.active_channels(),
            waiters: channels.values().sum(),
            channels,
            owner_entries: self.inner.acquisitions.ledgers.len(),
            wait_lines: self.inner.acquisitions.lines.len(),
            background_releases: self.inner.acquisitions.pending.in_flight(),
            local_hand_overs: self.inner.acquisitions.lines.hand_overs(),
            hand_off_contests: self.inner.acquisitions.lines.contests(),
        }
    }

    /// Shuts the client down. From the first poll nothing new is acquired or waited for
    /// ([`Error::Shutdown`](crate::Error::Shutdown)). The releases of every guard already
    /// dropped (and of acquisitions whose caller went away), running or waiting for their
    /// turn, are sent first; then the watchdog stops and the connections close. All of it
    /// takes at most [`Config::shutdown_timeout`] (5 s by default; a moment more where the
    /// server does not answer).
    ///
    /// A guard still held is **kept**, by choice: its lock is not released (the guard may be
    /// in use by another task, which must not lose it unawares), no longer renewed, and the
    /// guard is told [`Lost`](crate::HoldState::Lost); the lock expires after its lease or one
    /// watchdog timeout, as Redisson's `shutdown()` leaves it. Release guards before shutting
    /// down to free their locks at once. A process should end `main` with this call: the
    /// background releases of guards dropped just before would otherwise end with the runtime.
    ///
    /// The report says how many releases could not be sent in time and how many holds were
    /// kept. A second call returns at once with an empty report.
    ///
    /// # Cancel safety
    /// The client counts as shut down from the first poll; a dropped future stops waiting for
    /// the releases (they go on while the runtime lives) and may leave the connections to close
    /// when the last clone of the client is dropped.
    pub async fn shutdown(&self) -> ShutdownReport {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return ShutdownReport::default();
        }
        let deadline = crate::types::millis::later(
            tokio::time::Instant::now(),
            self.config().shutdown_timeout,
        );
        let unsent = self.pending_releases().drained(deadline).await;
        if unsent > 0 {
            log::warn!(
                "shutdown: {unsent} background releases not sent within the shutdown timeout"
            );
        }
        self.inner.stopped.store(true, Ordering::Release);
        let kept = self.inner.watchdog.stop();
        // Closing waits for the server no longer than the timeout (at least a moment): one that
        // does not answer leaves the connections to close with the client.
        let close = async {
            self.inner.failovers.shutdown().await;
            self.inner.pubsub.shutdown().await;
            self.inner.core.quit().await;
        };
        let moment = crate::types::millis::later(
            tokio::time::Instant::now(),
            std::time::Duration::from_millis(100),
        );
        if tokio::time::timeout_at(deadline.max(moment), close)
            .await
            .is_err()
        {
            log::warn!(
                "shutdown: the server did not answer; the connections close with the client"
            );
        }
        ShutdownReport { unsent, kept }
    }

    /// `true` once `shutdown` began: nothing new is acquired or waited for.
    pub(crate) fn is_closed(&self) -> bool {
        self.inner.closed.load(Ordering::Acquire)
    }

    /// `true` once `shutdown` closed the connections: nothing is sent, releases included.
    pub(crate) fn is_stopped(&self) -> bool {
        self.inner.stopped.load(Ordering::Acquire)
    }

    pub(crate) fn core(&self) -> &Core {
        &self.inner.core
    }

    pub(crate) fn pubsub(&self) -> &PubSub {
        &self.inner.pubsub
    }

    pub(crate) fn watchdog(&self) -> &Watchdog {
        &self.inner.watchdog
    }

    pub(crate) fn receipts(&self) -> &ReceiptSweeper {
        &self.inner.receipts
    }

    /// What the client knows of the server's restarts (RedLock's delayed-restart rule).
    pub(crate) fn restarts(&self) -> &Restarts {
        &self.inner.restarts
    }

    /// Background releases in flight, which later acquisitions of the same lock wait for.
    pub(crate) fn pending_releases(&self) -> &Arc<PendingReleases> {
        &self.inner.acquisitions.pending
    }

    /// The turns of this client's acquisition attempts (see `acquisitions::ATTEMPTS_IN_FLIGHT`).
    pub(crate) fn attempt_turns(&self) -> &tokio::sync::Semaphore {
        &self.inner.acquisitions.attempts
    }

    /// The local wait lines of this client's waiters (see `acquisitions::line`).
    pub(crate) fn wait_lines(&self) -> &Arc<WaitLines> {
        &self.inner.acquisitions.lines
    }

    /// What this client knows of its owners' hold counts (see `ledger`).
    pub(crate) fn ledgers(&self) -> &Ledgers {
        &self.inner.acquisitions.ledgers
    }

    /// The runtime the client's background work runs on.
    pub(crate) fn runtime(&self) -> &tokio::runtime::Handle {
        &self.inner.runtime
    }

    /// The one background release, for every guard dropped and every orphaned acquisition
    /// (a lock's hold, a permit, a semaphore's anonymous permits): `release` runs on the
    /// client's runtime in one of the background releases' turns (at most
    /// `acquisitions::pending::IN_FLIGHT` at once, the rest in line in the order handed over),
    /// never blocks the caller and never panics; its error is logged, with `what` (the lock
    /// or semaphore and what stays behind). The one retry rule is the release's own: a
    /// release that can be repeated (a lock's, answered from its receipt; a permit's, by its
    /// id) tries its transient failures again, at most `retry_attempts` times `retry_delay`
    /// apart; one that cannot (anonymous permits: a repeat could give them back twice) is
    /// tried once. Nothing starts on a stopped client (one shutting down still sends them).
    ///
    /// `release` makes the release's future when its turn comes: a release waiting for a turn
    /// keeps only what it captures (a claim, a permit's id), not a future as large as its
    /// largest state (ten thousand guards dropped at once: ten thousand of them waiting).
    pub(crate) fn release_in_background<M, F>(&self, what: String, release: M)
    where
        M: FnOnce() -> F + Send + 'static,
        F: Future<Output = Result<(), crate::error::Error>> + Send + 'static,
    {
        if self.is_stopped() {
            return;
        }
        self.pending_releases().spawn(
            self.runtime(),
            Box::new(move || {
                Box::pin(async move {
                    if let Err(e) = release().await {
                        log::warn!("background release of {what} failed: {e:#}");
                    }
                })
            }),
        );
    }

    /// Runs background work on the client's runtime (works from threads without a runtime).
    pub(crate) fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.inner.runtime.spawn(fut)
    }

    /// The raw name of a user-facing lock name (through the name mapper).
    pub(crate) fn map_name(&self, name: &str) -> String {
        match &self.config().name_mapper {
            Some(m) => m.map(name),
            None => name.to_owned(),
        }
    }

    /// The base owner field `<client uuid>:<owner id>`.
    pub(crate) fn owner_field(&self, owner: Owner) -> String {
        format!("{}:{}", self.id(), owner.id())
    }

    /// The watchdog timeout in milliseconds (the TTL of a lock taken without a lease).
    pub(crate) fn watchdog_ms(&self) -> u64 {
        self.config().lock_watchdog_timeout.as_millis() as u64
    }
}
