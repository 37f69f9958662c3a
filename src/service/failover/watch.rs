//! The failover watcher's I/O: one listener per sentinel, and the loop that acts on what
//! they hear as [`attempts`](super::attempts) decides: holds put in doubt and commands held
//! ([`begin`]), the connections moved to the master a majority of the sentinels name
//! ([`move_to`]), the failover ended there ([`end`]).

use std::{collections::VecDeque, sync::Weak, time::Duration};

use fred::{
    clients::SubscriberClient,
    interfaces::{ClientLike, EventInterface, PubsubInterface, ServerInterface},
};
use tokio::{
    sync::{broadcast::error::RecvError, mpsc},
    time::Instant,
};

use super::{
    attempts::{is_at, majority, replacing, Action, Astray, Watch, RETRY_WITHIN},
    event::{parse, payload_text, Addr, Event, CHANNELS},
};
use crate::{
    conn::{connect::Sentinels, core::Core},
    service::watchdog::FailoverHolds,
};

/// Reads every sentinel's events and acts on them, for as long as the client lives.
pub(super) async fn watch(
    core: Weak<Core>,
    holds: FailoverHolds,
    sub: fred::clients::Client,
    sentinels: Sentinels,
    clients: Vec<SubscriberClient>,
) {
    let (tx, rx) = mpsc::unbounded_channel::<(usize, Event)>();
    for (i, client) in clients.iter().enumerate() {
        listen(i, client, tx.clone(), sentinels.master.clone());
    }
    drop(tx);
    let cap = match core.upgrade() {
        Some(c) => c.config().lock_watchdog_timeout,
        None => return,
    };
    let mut watcher = Watcher {
        core,
        holds,
        sub,
        sentinels,
        rx,
        backlog: VecDeque::new(),
        watch: Watch::new(cap),
    };
    watcher.run().await;
}

/// Connects to one sentinel (the `i`th), subscribes to its failover events and sends those
/// about `master` to the watcher (a lagged receiver as [`Event::Missed`]), until the watcher
/// is gone.
fn listen(
    i: usize,
    client: &SubscriberClient,
    tx: mpsc::UnboundedSender<(usize, Event)>,
    master: String,
) {
    let mut messages = client.message_rx();
    let _connection = client.connect();
    let _resubscribe = client.manage_subscriptions();
    let client = client.clone();
    tokio::spawn(async move {
        if client.wait_for_connect().await.is_ok() {
            if let Err(e) = client.subscribe(CHANNELS.to_vec()).await {
                log::warn!("cannot subscribe to a sentinel's failover events: {e:#}");
            }
        }
        loop {
            match messages.recv().await {
                Ok(m) => {
                    let Some(payload) = payload_text(&m.value) else {
                        continue;
                    };
                    if let Some(event) = parse(&m.channel, &payload, &master) {
                        log::info!("sentinel {}: {} {payload}", m.server, m.channel);
                        if tx.send((i, event)).is_err() {
                            return;
                        }
                    }
                }
                // A missed event may have been the switch: check the master.
                Err(RecvError::Lagged(_)) => {
                    if tx.send((i, Event::Missed)).is_err() {
                        return;
                    }
                }
                Err(RecvError::Closed) => return,
            }
        }
    });
}

/// The watcher: its connections, the events the listeners send, and what it knows.
struct Watcher {
    core: Weak<Core>,
    holds: FailoverHolds,
    /// The registry's subscriber connection, moved with the command connection.
    sub: fred::clients::Client,
    sentinels: Sentinels,
    rx: mpsc::UnboundedReceiver<(usize, Event)>,
    /// Events read while a switch was handled, handled next.
    backlog: VecDeque<(usize, Event)>,
    watch: Watch,
}

impl Watcher {
    /// Handles events (the backlog first) and timers until the client or every listener is
    /// gone.
    async fn run(&mut self) {
        loop {
            let event = match (self.backlog.pop_front(), self.watch.timer()) {
                (Some(e), _) => Some(e),
                (None, Some(at)) => tokio::select! {
                    e = self.rx.recv() => e,
                    _ = tokio::time::sleep_until(at) => {
                        let Some(core) = self.core.upgrade() else { return };
                        self.on_timer(&core).await;
                        continue;
                    }
                },
                (None, None) => self.rx.recv().await,
            };
            let Some((sentinel, event)) = event else {
                return;
            };
            let Some(core) = self.core.upgrade() else {
                return;
            };
            self.on_event(&core, sentinel, event).await;
        }
    }

    /// A timer came due: an attempt without news past its cap ends, and the connections try
    /// again to reach the master the sentinels name.
    async fn on_timer(&mut self, core: &Core) {
        let due = self.watch.on_timer(Instant::now());
        if due.end {
            log::warn!(
                "a Sentinel failover of {} began {:?} ago without a switch; checking the holds \
                 on the master the connection reaches",
                self.sentinels.master,
                self.watch.cap
            );
            end(core, &self.holds);
        }
        if let Some(target) = due.reach {
            let to = named_master(core, &self.sentinels).await.or(target);
            self.watch.astray = self.arrive(core, to, RETRY_WITHIN).await;
        }
    }

    /// One sentinel's event: acted on as [`Attempts::on`](super::attempts::Attempts::on) says.
    async fn on_event(&mut self, core: &Core, sentinel: usize, event: Event) {
        let to = match self.watch.attempts.on(sentinel, event, Instant::now()) {
            Action::Nothing => None,
            Action::Begin => {
                begin(core, &self.holds);
                None
            }
            // Not on a master the sentinels do not name: commands go on, nothing confirms.
            Action::End if self.watch.astray.is_some() => {
                core.set_failover(false);
                None
            }
            Action::End => {
                end(core, &self.holds);
                None
            }
            // A `+switch-master` may be stale (a sentinel catching up republishes an old
            // switch): the master is the one most sentinels name now, else the message's.
            Action::Switch(announced) => {
                Some(named_master(core, &self.sentinels).await.or(announced))
            }
            Action::Check => {
                let named = named_master(core, &self.sentinels).await;
                match self.watch.attempts.checked(named) {
                    Action::Switch(named) => Some(named),
                    _ => None,
                }
            }
        };
        if let Some(to) = to {
            self.switch(core, to).await;
        }
    }

    /// The master is `to` now (`None`: whichever the sentinels name): the connections move
    /// there, within one connect timeout, unless they are there already and no failover is
    /// under way (another sentinel's announcement of the same switch).
    async fn switch(&mut self, core: &Core, to: Option<Addr>) {
        let there = to.as_ref().is_some_and(|(h, p)| {
            is_at(core.redis().sentinel_primary().as_ref(), h, *p)
                && is_at(self.sub.sentinel_primary().as_ref(), h, *p)
        });
        if there && !self.holds.under_way() {
            return;
        }
        if !self.holds.under_way() {
            begin(core, &self.holds);
        }
        let within = core.config().connect_timeout;
        let was_astray = self.watch.astray.is_some();
        self.watch.astray = self.arrive(core, to, within).await;
        if let (Some((_, to)), false) = (&self.watch.astray, was_astray) {
            log::warn!(
                "the connections reach {:?}, not the master the sentinels name \
                 ({to:?}), after {within:?}: lock commands go on, but no hold is \
                 confirmed until they reach it (tried again every {RETRY_WITHIN:?})",
                core.redis().sentinel_primary()
            );
        }
    }

    /// Moves the command and subscriber connections to `to` (see [`move_to`], for at most
    /// `within`) and ends the failover there, unless a failover of that master began meanwhile
    /// (the events read in the meantime go to the backlog), or the connections did not reach
    /// it: then lock commands go on, but nothing confirms a hold until they do, and the next
    /// try is returned.
    async fn arrive(&mut self, core: &Core, to: Option<Addr>, within: Duration) -> Astray {
        let there = move_to(core, &self.sub, &self.sentinels, to.clone(), within).await;
        // A failover of the master just reached may have begun meanwhile: then the holds stay
        // in doubt (its `+try-failover` is handled next), not confirmed there for a moment.
        while let Ok(e) = self.rx.try_recv() {
            self.backlog.push_back(e);
        }
        let reached = core.redis().sentinel_primary();
        if replacing(self.backlog.iter(), reached.as_ref()) {
            log::warn!(
                "a failover of the new master {reached:?} began while the client moved to it; \
                 the holds stay in doubt"
            );
            return None;
        }
        if !there {
            log::debug!("the connections reach {reached:?}, not {to:?}; trying again");
            core.set_failover(false);
            return Some((Instant::now() + RETRY_WITHIN, to));
        }
        end(core, &self.holds);
        None
    }
}

/// The master a majority of the sentinels name now (`SENTINEL get-master-addr-by-name` on a
/// short-lived connection to each, within one command timeout); `None` without a majority.
async fn named_master(core: &Core, sentinels: &Sentinels) -> Option<(String, u16)> {
    let replies = sentinels
        .ask(
            &["get-master-addr-by-name", sentinels.master.as_str()],
            core.config().timeout,
        )
        .await;
    let answers: Vec<(String, u16)> = replies
        .into_iter()
        .filter_map(|reply| {
            let words: Vec<String> = reply.convert().ok()?;
            match words.as_slice() {
                [host, port] => Some((host.clone(), port.parse::<u16>().ok()?)),
                _ => None,
            }
        })
        .collect();
    majority(&answers, sentinels.nodes.len())
}

fn begin(core: &Core, holds: &FailoverHolds) {
    log::warn!(
        "a Sentinel failover began: every hold is in doubt until the new master confirms it"
    );
    holds.began("a Sentinel failover began");
    core.set_failover(true);
}

fn end(core: &Core, holds: &FailoverHolds) {
    core.set_failover(false);
    holds.ended();
}

/// Closes and opens the command and subscriber connections until both reach `to` (`None`:
/// once, to whichever master the sentinels name), asking the sentinels again between tries
/// (they converge within moments), for at most `within`. `true` once both reach it.
async fn move_to(
    core: &Core,
    sub: &fred::clients::Client,
    sentinels: &Sentinels,
    mut to: Option<(String, u16)>,
    within: Duration,
) -> bool {
    let until = Instant::now() + within;
    let mut first = true;
    loop {
        let redis = core.redis();
        let reached = |server: Option<fred::types::config::Server>| match &to {
            Some((h, p)) => is_at(server.as_ref(), h, *p),
            None => false,
        };
        let main_there = reached(redis.sentinel_primary());
        let sub_there = reached(sub.sentinel_primary());
        if (main_there && sub_there) || (to.is_none() && !first) {
            log::info!("connected to the new master {:?}", redis.sentinel_primary());
            return true;
        }
        if Instant::now() >= until {
            return false;
        }
        if !first {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Some(named) = named_master(core, sentinels).await {
                to = Some(named);
            }
        }
        first = false;
        tokio::join!(
            async {
                if !main_there {
                    let _ = tokio::time::timeout(within, redis.force_reconnection()).await;
                }
            },
            async {
                if !sub_there {
                    let _ = tokio::time::timeout(within, sub.force_reconnection()).await;
                }
            }
        );
    }
}
