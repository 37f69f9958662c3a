//! The pool of private connections a synced acquisition runs on and the `WAIT` after it
//! (`ReplicaSync`, `Checkout`, `Barrier`, `Synced`), and the replica count per master, cached
//! and read again (see the folder's face for the whole story).

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use fred::{
    clients::Client as FredClient,
    interfaces::{ClientLike, ClusterInterface, ServerInterface},
    types::{
        config::{Options, Server},
        InfoKind,
    },
};
use parking_lot::Mutex;
use tokio::{
    sync::{OwnedSemaphorePermit, Semaphore},
    time::Instant,
};

use super::{
    count::{online_replicas, replicas_alive},
    memory::{Master, Memory, Wanted, ZERO_RECHECK},
};
use crate::{
    config::Config,
    conn::connect::Sentinels,
    error::{Error, Result},
};

/// At most this many connections run synced acquisitions at once.
pub(crate) const POOL_SIZE: usize = 8;

/// What the replicas said about an acquisition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Synced {
    /// No `WAIT` was needed (sync off, no replicas, `WAIT` unsupported, nothing acquired).
    NotNeeded,
    /// At least one replica acknowledged.
    Acked { wanted: u64, acked: u64 },
    /// No replica acknowledged within the timeout (or the `WAIT` failed).
    Missing { wanted: u64, acked: u64 },
}

/// What the client has learned of the masters' replicas and of `WAIT`.
#[derive(Default)]
struct State {
    /// Per master: its replica count and when it was read.
    counts: HashMap<Master, (u64, Instant)>,
    /// `WAIT 0 0` was answered.
    probed: bool,
    /// The server refused `WAIT` (unknown command, no permission): never sync.
    unsupported: bool,
    /// A failed `INFO` read was logged (once, not every recheck).
    info_warned: bool,
    /// What the client remembers of the masters' replicas.
    memory: Memory,
}

/// The replica-sync service of one client.
pub(crate) struct ReplicaSync {
    enabled: bool,
    clustered: bool,
    /// Sentinel: the sentinels, asked whether a promoted master's replicas are alive.
    sentinels: Option<Sentinels>,
    /// Held while the sentinels are asked and an acquisition waits for the answer.
    asking: tokio::sync::Mutex<()>,
    timeout_ms: u64,
    command_timeout: Duration,
    connect_timeout: Duration,
    state: Arc<Mutex<State>>,
    idle: Mutex<Vec<FredClient>>,
    slots: Arc<Semaphore>,
    /// Set by [`quit`](Self::quit): connections coming back are closed, none is opened.
    closed: AtomicBool,
    /// Moved on by [`master_changed`](Self::master_changed): a connection checked out before
    /// is closed when it comes back, not pooled.
    generation: AtomicU64,
}

/// Where a synced attempt leaves its private connection while its script may be in flight: if
/// the attempt's future is dropped, the reconciliation takes the connection from here and
/// waits for the server to answer a `QUIT` on it (the server reads the `QUIT` after the script)
/// before it reads the owner's count on the command connection, so it never judges the attempt
/// before the script ran.
pub(crate) type Barrier = Mutex<Option<FredClient>>;

/// Closes a connection taken from a [`Barrier`], waiting (at most `within`) for the server to
/// answer the `QUIT`, in a task so that it completes even if the caller is dropped.
pub(crate) async fn close_and_wait(client: FredClient, within: Duration) {
    let quit = tokio::spawn(async move {
        let _ = client.quit().await;
    });
    let _ = tokio::time::timeout(within, quit).await;
}

/// One pooled connection (on a cluster: one set of node connections), checked out by one
/// acquisition.
pub(crate) struct Checkout {
    pub(crate) client: FredClient,
    /// The master the acquisition's key lives on.
    master: Master,
    /// The acquisition's key's slot (cluster).
    slot: Option<u16>,
    /// The node the script ran on after an `ASK` (its slot being migrated there): the `WAIT`
    /// goes there.
    pub(crate) asked: Option<Server>,
    /// Handed back to the pool or closed on purpose; otherwise (the acquisition's future was
    /// dropped while the script or the `WAIT` ran) the drop closes the connection, whose state
    /// is unknown. A fred client dropped without `QUIT` would stay connected.
    returned: bool,
    /// The connection was left in the attempt's [`Barrier`]: a drop leaves closing it to the
    /// reconciliation.
    in_barrier: bool,
    /// The pool's generation when it was checked out.
    generation: u64,
    _permit: OwnedSemaphorePermit,
}

impl Checkout {
    /// Leaves this connection in `barrier` while the script runs (see [`Barrier`]).
    pub(crate) fn expose(&mut self, barrier: &Barrier) {
        *barrier.lock() = Some(self.client.clone());
        self.in_barrier = true;
    }
}

impl Drop for Checkout {
    fn drop(&mut self) {
        if !self.returned && !self.in_barrier {
            discard(self.client.clone());
        }
    }
}

impl ReplicaSync {
    pub(crate) fn new(config: &Config, clustered: bool, sentinels: Option<Sentinels>) -> Self {
        Self {
            enabled: config.check_lock_synced_replicas,
            clustered,
            sentinels,
            asking: tokio::sync::Mutex::new(()),
            timeout_ms: config.replicas_sync_ms(),
            command_timeout: config.timeout,
            connect_timeout: config.connect_timeout,
            state: Arc::new(Mutex::new(State::default())),
            idle: Mutex::new(Vec::new()),
            slots: Arc::new(Semaphore::new(POOL_SIZE)),
            closed: AtomicBool::new(false),
            generation: AtomicU64::new(0),
        }
    }

    /// The master `client` sends a command for `slot` to; `Err(())` on a cluster whose routing
    /// table does not know the slot yet.
    fn master_of(&self, client: &FredClient, slot: Option<u16>) -> std::result::Result<Master, ()> {
        if !self.clustered {
            return Ok(client.sentinel_primary());
        }
        let slot = slot.ok_or(())?;
        client
            .cached_cluster_state()
            .and_then(|state| state.get_server(slot).cloned())
            .map(Some)
            .ok_or(())
    }

    /// `true` when an acquisition sent now would run on the shared command connection, not
    /// on a connection of its own: replica sync is off, or unsupported, or the standalone or
    /// Sentinel master had no replica when last read (a cluster's masters are not looked up
    /// here: `false` while sync is on).
    pub(crate) fn on_shared_connection(&self, shared: &FredClient) -> bool {
        if !self.enabled {
            return true;
        }
        let state = self.state.lock();
        if state.unsupported {
            return true;
        }
        if self.clustered {
            return false;
        }
        let master = shared.sentinel_primary();
        matches!(state.counts.get(&master), Some((0, _)))
    }

    /// Options that send a command to `master` (on a cluster) with `timeout`.
    fn options(&self, master: &Master, timeout: Option<Duration>) -> Options {
        Options {
            timeout,
            cluster_node: if self.clustered { master.clone() } else { None },
            ..Default::default()
        }
    }

    /// The connection an acquisition on a key of `slot` runs on when it must sync; `None` when
    /// no `WAIT` is needed (the caller uses the command connection). `shared` is the command
    /// connection, used for the `INFO` read.
    pub(crate) async fn checkout(
        &self,
        shared: &FredClient,
        slot: Option<u16>,
    ) -> Result<Option<Checkout>> {
        if !self.enabled || self.state.lock().unsupported {
            return Ok(None);
        }
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Shutdown);
        }
        let Ok(master) = self.master_of(shared, slot) else {
            log::debug!("slot {slot:?} has no known master yet; not syncing this acquisition");
            return Ok(None);
        };
        self.reached(&master);
        if self.replicas(shared, &master).await == 0 {
            return Ok(None);
        }
        let permit = tokio::time::timeout(self.command_timeout, self.slots.clone().acquire_owned())
            .await
            .map_err(|_| {
                Error::Timeout(
                    format!(
                        "every replica-sync connection stayed busy for {:?}",
                        self.command_timeout
                    )
                    .into(),
                )
            })?
            .map_err(|_| Error::Shutdown)?;
        let generation = self.generation.load(Ordering::Acquire);
        let pooled = self.idle.lock().pop();
        let client = match pooled {
            Some(c) => c,
            None => self.open(shared).await?,
        };
        // From here on a dropped future closes the connection (see `Checkout`'s drop).
        let checkout = Checkout {
            client,
            master,
            slot,
            asked: None,
            returned: false,
            in_barrier: false,
            generation,
            _permit: permit,
        };
        if !self.state.lock().probed {
            // Boxed: fred's `WAIT` (5 KiB) runs once per client; every acquisition's checkout
            // would otherwise carry its slot.
            let probe = Box::pin(
                checkout
                    .client
                    .with_options(&self.options(&checkout.master, None))
                    .wait::<i64>(0, 0),
            )
            .await;
            match probe {
                Ok(_) => self.state.lock().probed = true,
                Err(e) if refused(&e) => {
                    log::warn!(
                        "the server refuses WAIT ({}); acquisitions are not synced with replicas",
                        e.details()
                    );
                    self.state.lock().unsupported = true;
                    self.give_back(checkout);
                    return Ok(None);
                }
                Err(e) => {
                    self.throw_away(checkout);
                    return Err(Error::from_redis(e, ""));
                }
            }
        }
        Ok(Some(checkout))
    }

    /// Returns a connection whose last command completed normally to the pool.
    pub(crate) fn give_back(&self, mut checkout: Checkout) {
        checkout.returned = true;
        if checkout.generation == self.generation.load(Ordering::Acquire) {
            self.put_back(checkout.client.clone());
        } else {
            discard(checkout.client.clone());
        }
    }

    /// The sentinels are replacing the master: the pooled connections (to the old one) are
    /// closed, those checked out now are closed when they come back, and the replica counts
    /// are read again.
    pub(crate) fn master_changed(&self) {
        let idle = {
            let mut idle = self.idle.lock();
            self.generation.fetch_add(1, Ordering::AcqRel);
            std::mem::take(&mut *idle)
        };
        for client in idle {
            discard(client);
        }
        self.state.lock().counts.clear();
    }

    /// Drops a connection whose state is unknown (a failed or timed-out command).
    pub(crate) fn throw_away(&self, mut checkout: Checkout) {
        checkout.returned = true;
        self.forget_count(&checkout.master);
        discard(checkout.client.clone());
    }

    /// Closes a connection whose last command got no reply, waiting (at most one command
    /// timeout) until the server answered the `QUIT` or the connection is gone.
    pub(crate) async fn close_before_reconcile(&self, mut checkout: Checkout) {
        checkout.returned = true;
        self.forget_count(&checkout.master);
        let client = checkout.client.clone();
        drop(checkout);
        close_and_wait(client, self.command_timeout).await;
    }

    fn put_back(&self, client: FredClient) {
        let mut idle = self.idle.lock();
        if idle.len() < POOL_SIZE && !self.closed.load(Ordering::Acquire) {
            idle.push(client);
        } else {
            drop(idle);
            discard(client);
        }
    }

    /// `WAIT <replicas> <timeout>` on the connection that ran the acquisition (on a cluster: to
    /// the node that owns the key now, i.e. the one that ran the script, also after a `MOVED`);
    /// the timeout is the sync timeout, or the time left before `deadline` if that is shorter
    /// (at least 1 ms).
    pub(crate) async fn wait(
        &self,
        mut checkout: Checkout,
        lock: &str,
        deadline: Option<Instant>,
    ) -> Synced {
        if let Some(target) = checkout.asked.clone() {
            checkout.master = Some(target);
        } else if self.clustered {
            match self.master_of(&checkout.client, checkout.slot) {
                Ok(now) if now != checkout.master => checkout.master = now,
                Ok(_) => {}
                Err(()) => {
                    log::warn!("the owner of {lock}'s slot is unknown after the acquisition");
                    self.throw_away(checkout);
                    return Synced::Missing {
                        wanted: 1,
                        acked: 0,
                    };
                }
            }
        }
        let wanted = self.replicas(&checkout.client, &checkout.master).await;
        if wanted == 0 {
            self.give_back(checkout);
            return Synced::NotNeeded;
        }
        let timeout_ms = match deadline {
            Some(d) => {
                let left =
                    crate::types::millis::clamp_millis(d.saturating_duration_since(Instant::now()));
                self.timeout_ms.min(left).max(1)
            }
            None => self.timeout_ms,
        };
        let options = self.options(
            &checkout.master,
            Some(Duration::from_millis(timeout_ms).saturating_add(self.command_timeout)),
        );
        // WAIT for one acknowledgement, not for every replica: one is what the acquisition
        // needs (none → undone), and a paused or lagging replica then never delays lock
        // operations while another one is healthy.
        let reply = checkout
            .client
            .with_options(&options)
            .wait::<i64>(1, timeout_ms as i64)
            .await;
        match reply {
            Ok(acked) => {
                let acked = u64::try_from(acked).unwrap_or(0);
                if acked == 0 {
                    // Replicas may have gone: read the count again next time.
                    self.forget_count(&checkout.master);
                }
                self.give_back(checkout);
                if acked == 0 {
                    Synced::Missing { wanted, acked }
                } else {
                    Synced::Acked { wanted, acked }
                }
            }
            Err(e) => {
                log::warn!("WAIT after acquiring {lock} failed: {e:#}");
                self.throw_away(checkout);
                Synced::Missing { wanted, acked: 0 }
            }
        }
    }

    fn forget_count(&self, master: &Master) {
        self.state.lock().counts.remove(master);
    }

    /// The cached replica count of `master`; read with `INFO replication` through `via` when
    /// unknown. A count of 0 older than [`ZERO_RECHECK`] is read again in the background (the
    /// acquisition goes on unsynced meanwhile, so a lone server's acquisitions never wait for
    /// an `INFO`). A count of 0 may still want one acknowledgement (see [`Memory`]).
    async fn replicas(&self, via: &FredClient, master: &Master) -> u64 {
        let n = self.read_replicas(via, master).await;
        let wanted = self.state.lock().memory.wanted(master, n, Instant::now());
        match wanted {
            Wanted::Count(n) => n,
            Wanted::Ask { meanwhile: Some(n) } => {
                let (state, sentinels, master) =
                    (self.state.clone(), self.sentinels.clone(), master.clone());
                let within = self.command_timeout;
                drop(tokio::spawn(async move {
                    let alive = replicas_alive(sentinels.as_ref(), &master, within).await;
                    state.lock().memory.answered(&master, alive, Instant::now());
                }));
                n
            }
            Wanted::Ask { meanwhile: None } => {
                // One question at a time: the acquisitions that come meanwhile (a burst right
                // after a failover) take its answer.
                let _asking = self.asking.lock().await;
                let again = self.state.lock().memory.wanted(master, 0, Instant::now());
                match again {
                    Wanted::Ask { meanwhile: None } => {}
                    Wanted::Count(n) | Wanted::Ask { meanwhile: Some(n) } => return n,
                }
                let alive =
                    replicas_alive(self.sentinels.as_ref(), master, self.command_timeout).await;
                self.state
                    .lock()
                    .memory
                    .answered(master, alive, Instant::now())
            }
        }
    }

    /// The command connection reaches `master` (standalone, Sentinel): see [`Memory`].
    fn reached(&self, master: &Master) {
        if !self.clustered {
            self.state.lock().memory.reached(master, Instant::now());
        }
    }

    async fn read_replicas(&self, via: &FredClient, master: &Master) -> u64 {
        let cached = self.state.lock().counts.get(master).copied();
        match cached {
            Some((n, at)) if n > 0 || at.elapsed() < ZERO_RECHECK => n,
            Some(_) => {
                // Stamped now, so one refresh runs at a time.
                self.state
                    .lock()
                    .counts
                    .insert(master.clone(), (0, Instant::now()));
                let (via, master, state) = (via.clone(), master.clone(), self.state.clone());
                let options = self.options(&master, None);
                drop(tokio::spawn(async move {
                    read_count(&via, &options, &state, &master).await;
                }));
                0
            }
            // Boxed: fred's `INFO` (5 KiB) is read once per master; every acquisition's
            // checkout, which reads the cache, would otherwise carry its slot.
            None => {
                Box::pin(read_count(
                    via,
                    &self.options(master, None),
                    &self.state,
                    master,
                ))
                .await
            }
        }
    }

    /// Reads the replica count of a standalone or Sentinel master at connect, so that no
    /// acquisition waits for it.
    pub(crate) async fn prime(&self, shared: &FredClient) {
        if self.enabled && !self.clustered {
            if let Ok(master) = self.master_of(shared, None) {
                self.reached(&master);
                self.replicas(shared, &master).await;
            }
        }
    }

    /// A new connection to the same deployment as `shared` (Sentinel: to the current master,
    /// through the sentinels; a cluster: to its nodes).
    async fn open(&self, shared: &FredClient) -> Result<FredClient> {
        // Sentinel, just after a failover: a sentinel that has not heard of it yet names the
        // old master. A connection that reached another master than the command connection's
        // is closed and opened again (a few times; the sentinels agree within moments).
        for _ in 0..5 {
            let client = self.open_once(shared).await?;
            if self.clustered || client.sentinel_primary() == shared.sentinel_primary() {
                return Ok(client);
            }
            discard(client);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Err(Error::Connection(
            "the sentinels named another master than the command connection's".into(),
        ))
    }

    async fn open_once(&self, shared: &FredClient) -> Result<FredClient> {
        let client = shared.clone_new();
        match tokio::time::timeout(self.connect_timeout, client.init()).await {
            Ok(Ok(_task)) => Ok(client),
            Ok(Err(e)) => {
                discard(client);
                Err(Error::from_redis(e, ""))
            }
            Err(_) => {
                discard(client);
                Err(Error::Connection(
                    format!(
                        "could not open a replica-sync connection within {:?}",
                        self.connect_timeout
                    )
                    .into(),
                ))
            }
        }
    }

    /// Closes the pooled connections.
    pub(crate) async fn quit(&self) {
        let idle = {
            let mut idle = self.idle.lock();
            self.closed.store(true, Ordering::Release);
            std::mem::take(&mut *idle)
        };
        for c in idle {
            let _ = c.quit().await;
        }
    }
}

/// Reads `INFO replication` of `master` through `via` and caches its replica count (0 when the
/// read fails: one warning, then no sync until a later read succeeds).
async fn read_count(
    via: &FredClient,
    options: &Options,
    state: &Mutex<State>,
    master: &Master,
) -> u64 {
    let info = via
        .with_options(options)
        .info::<String>(Some(InfoKind::Replication))
        .await;
    let n = match info {
        Ok(text) => online_replicas(&text),
        Err(e) => {
            if !std::mem::replace(&mut state.lock().info_warned, true) {
                log::warn!("cannot read INFO replication ({e:#}); not syncing with replicas");
            }
            0
        }
    };
    state
        .lock()
        .counts
        .insert(master.clone(), (n, Instant::now()));
    n
}

/// Closes a connection in the background (outside a runtime it is just dropped).
fn discard(client: FredClient) {
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        drop(runtime.spawn(async move {
            let _ = client.quit().await;
        }));
    }
}

/// `true` for a server that does not let this client run `WAIT`.
fn refused(e: &fred::error::Error) -> bool {
    let d = e.details().to_ascii_lowercase();
    d.contains("unknown command") || d.contains("noperm") || d.contains("no permission")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_follows_the_setting() {
        let on = Config::default();
        assert!(ReplicaSync::new(&on, false, None).enabled);
        assert!(ReplicaSync::new(&on, true, None).enabled);
        let off = Config::default().check_lock_synced_replicas(false);
        assert!(!ReplicaSync::new(&off, false, None).enabled);
    }
}
