//! Sentinel failovers, heard as they happen.
//!
//! A Sentinel failover does not stop the old master. `SENTINEL FAILOVER`, or a master paused
//! past `down-after-milliseconds` and then resumed, or one killed and restarted after the
//! failover, leaves the old master running and answering as a master until the sentinels'
//! next `INFO` poll of it turns it into a replica (up to 10 s later). A client still connected
//! to it keeps renewing and acquiring there, while clients that reconnected acquire on the new
//! master: two holders, neither told. fred reconnects only when a connection fails.
//!
//! So a Sentinel client subscribes to every configured sentinel's failover events (one
//! subscriber connection per sentinel, fred's, re-subscribed after a reconnect) and:
//! - on `+try-failover` for its master (sent before the replica is promoted, so before anyone
//!   can acquire on the new master): every hold is in doubt and no renewal confirms it, a hold
//!   taken meanwhile starts in doubt ([`FailoverHolds::began`]), and commands wait (at most one
//!   command timeout) for the switch ([`Core::set_failover`]);
//! - on `+switch-master`: the sentinels are asked which master they name now (a majority of
//!   them; a sentinel catching up may republish an old switch, so the message's address is
//!   only the fallback), and the command and subscriber connections are closed and opened
//!   again until both reach it (fred asks the sentinels in order, and one that has not heard
//!   of the switch yet names the old master), for at most one connect timeout; the
//!   replica-sync connections to the old master are closed; then the wait ends and a renewal
//!   sent to the new master confirms each hold or finds it gone ([`FailoverHolds::ended`]);
//!   a switch ends only the attempts to replace the master it moved *from*: the sentinel that
//!   led a failover announces its switch last (once the replicas are reconfigured), and by
//!   then another sentinel may have begun replacing the new master (seen in chaos runs: two
//!   failovers a second apart, the second promoting a replica that had not synced); a
//!   `+try-failover` of the new master heard while moving to it keeps the holds in doubt;
//!   connections that do not reach the named master within the connect timeout confirm
//!   nothing (commands go on, the holds stay in doubt) and the move is tried again every
//!   second;
//! - on every sentinel's attempt abandoned (`-failover-abort-*`, `+failover-end-for-timeout`),
//!   or after one watchdog timeout without a switch: the same end, on the master the
//!   connections reach;
//! - on `+reset-master` (the sentinel forgot its state, its own attempt with it) or a sentinel's
//!   events missed (the receiver lagged): the sentinels are asked which master they name now.
//!   With no attempt left under way, as a switch to that master. While one is, the failover
//!   goes on unless they name another master than the ones being replaced (a switch that was
//!   missed): a reset of another sentinel, or a lag, must not end it on the master being
//!   replaced, where the holds would be confirmed.
//!
//! Nothing here is on a lock's path: it costs one connection per sentinel, and a few
//! short-lived ones per failover.

use std::{
    collections::{HashMap, VecDeque},
    sync::Arc,
    time::Duration,
};

use fred::{
    clients::SubscriberClient,
    interfaces::{ClientLike, EventInterface, PubsubInterface, ServerInterface},
    types::Value,
};
use tokio::{sync::broadcast::error::RecvError, time::Instant};

use crate::{
    conn::{connect::Sentinels, core::Core},
    service::watchdog::FailoverHolds,
};

/// The sentinel events the watcher listens to.
const CHANNELS: [&str; 7] = [
    "+try-failover",
    "+switch-master",
    "-failover-abort-not-elected",
    "-failover-abort-no-good-slave",
    "-failover-abort-slave-timeout",
    "+failover-end-for-timeout",
    "+reset-master",
];

/// A server's address as the sentinels announce it.
type Addr = (String, u16);

/// One sentinel event about the watched master.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Event {
    /// A sentinel started a failover attempt of the master at `of`.
    Began { of: Addr },
    /// A sentinel gave its attempt up.
    Abandoned,
    /// The master moved from `from` to `to`.
    Switched { from: Addr, to: Addr },
    /// The sentinel was reset (`SENTINEL RESET`): it forgot its attempt, if any; ask the
    /// sentinels again.
    Reset,
    /// Some of the sentinel's events were missed (the receiver lagged): ask the sentinels
    /// again.
    Missed,
}

/// The master name an event's payload concerns, and that master's address: `master <name>
/// <ip> <port>` for events of a master, `<type> <name> <ip> <port> @ <master> <ip> <port>` for
/// others.
fn master_named(payload: &str) -> Option<(&str, Addr)> {
    let mut words = payload.split_whitespace();
    let mut rest = match words.next()? {
        "master" => words,
        _ => payload.split(" @ ").nth(1)?.split_whitespace(),
    };
    let name = rest.next()?;
    let host = rest.next()?;
    let port = rest.next()?.parse().ok()?;
    Some((name, (host.to_owned(), port)))
}

/// Reads one message of `channel` about `master` (`None`: another master, or unreadable).
fn parse(channel: &str, payload: &str, master: &str) -> Option<Event> {
    if channel == "+switch-master" {
        // <name> <old ip> <old port> <new ip> <new port>
        let words: Vec<&str> = payload.split_whitespace().collect();
        return match words.as_slice() {
            [name, old_host, old_port, host, port] if *name == master => Some(Event::Switched {
                from: ((*old_host).to_owned(), old_port.parse().ok()?),
                to: ((*host).to_owned(), port.parse().ok()?),
            }),
            _ => None,
        };
    }
    let (name, of) = master_named(payload)?;
    if name != master {
        return None;
    }
    match channel {
        "+try-failover" => Some(Event::Began { of }),
        "+reset-master" => Some(Event::Reset),
        c if c.starts_with("-failover-abort") || c == "+failover-end-for-timeout" => {
            Some(Event::Abandoned)
        }
        _ => None,
    }
}

/// What the watcher knows: which sentinels have an attempt under way, of which master, since
/// when.
#[derive(Debug, Default)]
struct Attempts {
    trying: HashMap<usize, Addr>,
    since: Option<Instant>,
}

/// What to do after an event.
#[derive(Debug, PartialEq, Eq)]
enum Action {
    Nothing,
    /// Put everything in doubt and hold commands.
    Begin,
    /// Reconnect to this master (`None`: to whichever the sentinels name), then end.
    Switch(Option<Addr>),
    /// End without a reconnect: the attempts were given up.
    End,
    /// Ask the sentinels which master they name, then act on [`Attempts::checked`].
    Check,
}

impl Attempts {
    fn on(&mut self, sentinel: usize, event: Event, now: Instant) -> Action {
        match event {
            Event::Began { of } => {
                let first = self.trying.is_empty();
                self.trying.insert(sentinel, of);
                if first {
                    self.since = Some(now);
                    Action::Begin
                } else {
                    Action::Nothing
                }
            }
            Event::Abandoned => {
                if self.trying.remove(&sentinel).is_some() && self.trying.is_empty() {
                    self.since = None;
                    Action::End
                } else {
                    Action::Nothing
                }
            }
            Event::Switched { from, to } => {
                // A switch ends the attempts to replace the master it moved from, not one
                // that began since of the master it moved to: the sentinel that led a
                // failover announces its switch only once it has reconfigured the replicas,
                // by when another sentinel may be replacing the new master already.
                self.trying.retain(|_, of| *of != from);
                if self.trying.is_empty() {
                    self.since = None;
                    Action::Switch(Some(to))
                } else {
                    Action::Nothing
                }
            }
            Event::Reset => {
                // A reset sentinel forgets its failover state: its attempt is over, not the
                // others'.
                if self.trying.remove(&sentinel).is_some() && self.trying.is_empty() {
                    self.since = None;
                }
                Action::Check
            }
            Event::Missed => Action::Check,
        }
    }

    /// After a [`Check`](Action::Check): the sentinels name `named` now (`None`: no majority
    /// answered). With no attempt under way, move there. While one is, only a master other
    /// than the ones being replaced ends it (their switch was missed); the master being
    /// replaced, or no answer, leaves it under way, to end with its switch, every attempt
    /// given up, or the cap.
    fn checked(&mut self, named: Option<Addr>) -> Action {
        if self.trying.is_empty() {
            return Action::Switch(named);
        }
        match named {
            Some(to) if !self.trying.values().any(|of| *of == to) => {
                self.trying.clear();
                self.since = None;
                Action::Switch(Some(to))
            }
            _ => Action::Nothing,
        }
    }

    /// An attempt under way for longer than `cap` is given up on (the holds are checked on
    /// the master the connections reach).
    fn expired(&mut self, cap: Duration, now: Instant) -> bool {
        if self.since.is_some_and(|s| now >= s + cap) {
            self.trying.clear();
            self.since = None;
            return true;
        }
        false
    }
}

/// The failover watcher of a Sentinel client.
pub(crate) struct Failovers {
    clients: Vec<SubscriberClient>,
    task: Option<tokio::task::JoinHandle<()>>,
    /// Where the connections were started (their closing is spawned there on drop).
    runtime: tokio::runtime::Handle,
}

impl Failovers {
    /// Starts watching the sentinels of `core`'s deployment (nothing on other deployments).
    /// `sub` is the registry's subscriber connection, moved to the new master with the
    /// command connection.
    pub(crate) fn start(core: &Arc<Core>, holds: FailoverHolds, sub: SubscriberClient) -> Self {
        let Some(sentinels) = core.sentinels().cloned() else {
            return Self {
                clients: Vec::new(),
                task: None,
                runtime: tokio::runtime::Handle::current(),
            };
        };
        let clients = connect_all(core, &sentinels);
        let task = tokio::spawn(watch(
            Arc::downgrade(core),
            holds,
            sub,
            sentinels,
            clients.clone(),
        ));
        Self {
            clients,
            task: Some(task),
            runtime: tokio::runtime::Handle::current(),
        }
    }

    /// Stops watching and closes the sentinel connections.
    pub(crate) async fn shutdown(&self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        for c in &self.clients {
            let _ = tokio::time::timeout(Duration::from_millis(500), c.quit()).await;
        }
    }
}

impl Drop for Failovers {
    /// A client dropped without `shutdown`: the sentinel connections are closed too (a fred
    /// client left alone would stay connected, and reconnect).
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        for c in std::mem::take(&mut self.clients) {
            drop(self.runtime.spawn(async move {
                let _ = tokio::time::timeout(Duration::from_millis(500), c.quit()).await;
            }));
        }
    }
}

/// One subscriber connection per sentinel, connecting (and re-subscribing) in the background:
/// a sentinel down at connect is reached when it comes back.
fn connect_all(core: &Core, sentinels: &Sentinels) -> Vec<SubscriberClient> {
    let config = core.config();
    sentinels
        .nodes
        .iter()
        .filter_map(|node| {
            let builder = crate::conn::connect::builder_for(node.clone(), config);
            match builder.build_subscriber_client() {
                Ok(client) => Some(client),
                Err(e) => {
                    log::warn!("cannot watch a sentinel for failovers: {e}");
                    None
                }
            }
        })
        .collect()
}

/// Reads every sentinel's events and acts on them, for as long as the client lives.
async fn watch(
    core: std::sync::Weak<Core>,
    holds: FailoverHolds,
    sub: SubscriberClient,
    sentinels: Sentinels,
    clients: Vec<SubscriberClient>,
) {
    let master = sentinels.master.clone();
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Event)>();
    for (i, client) in clients.iter().enumerate() {
        let mut messages = client.message_rx();
        let _connection = client.connect();
        let _resubscribe = client.manage_subscriptions();
        let (client, tx, master) = (client.clone(), tx.clone(), master.clone());
        tokio::spawn(async move {
            if client.wait_for_connect().await.is_ok() {
                if let Err(e) = client.subscribe(CHANNELS.to_vec()).await {
                    log::warn!("cannot subscribe to a sentinel's failover events: {e}");
                }
            }
            loop {
                match messages.recv().await {
                    Ok(m) => {
                        let payload = match &m.value {
                            Value::String(s) => s.to_string(),
                            Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
                            _ => continue,
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
    drop(tx);
    let mut attempts = Attempts::default();
    // Events read while a switch was handled, handled next.
    let mut backlog: VecDeque<(usize, Event)> = VecDeque::new();
    // The connections did not reach the master the sentinels name: when to try again, and
    // the master to try (the holds stay in doubt meanwhile).
    let mut astray: Option<(Instant, Option<Addr>)> = None;
    let cap = match core.upgrade() {
        Some(c) => c.config().lock_watchdog_timeout,
        None => return,
    };
    loop {
        // The next timer: an attempt's cap, or another try to reach the named master.
        let timer = [
            attempts.since.map(|s| s + cap),
            astray.as_ref().map(|a| a.0),
        ]
        .into_iter()
        .flatten()
        .min();
        let event = match (backlog.pop_front(), timer) {
            (Some(e), _) => Some(e),
            (None, Some(at)) => tokio::select! {
                e = rx.recv() => e,
                _ = tokio::time::sleep_until(at) => {
                    let Some(core) = core.upgrade() else { return };
                    if attempts.expired(cap, Instant::now()) && astray.is_none() {
                        log::warn!(
                            "a Sentinel failover of {master} began {cap:?} ago without a switch; \
                             checking the holds on the master the connection reaches"
                        );
                        end(&core, &holds);
                    }
                    if let Some((when, target)) = astray.take() {
                        if !attempts.trying.is_empty() {
                            // A failover is under way again: its switch moves the connections
                            // (not a try now, which could end it on the master being replaced).
                            astray = Some((Instant::now() + RETRY_WITHIN, target));
                        } else if Instant::now() >= when {
                            let to = named_master(&core, &sentinels).await.or(target);
                            astray = arrive(
                                &core, &sub, &sentinels, &holds, to, RETRY_WITHIN, &mut rx,
                                &mut backlog,
                            )
                            .await;
                        } else {
                            astray = Some((when, target));
                        }
                    }
                    continue;
                }
            },
            (None, None) => rx.recv().await,
        };
        let Some((sentinel, event)) = event else {
            return;
        };
        let Some(core) = core.upgrade() else {
            return;
        };
        let to = match attempts.on(sentinel, event, Instant::now()) {
            Action::Nothing => None,
            Action::Begin => {
                begin(&core, &holds);
                None
            }
            // Not on a master the sentinels do not name: commands go on, nothing confirms.
            Action::End if astray.is_some() => {
                core.set_failover(false);
                None
            }
            Action::End => {
                end(&core, &holds);
                None
            }
            // A `+switch-master` may be stale (a sentinel catching up republishes an old
            // switch): the master is the one most sentinels name now, else the message's.
            Action::Switch(announced) => Some(named_master(&core, &sentinels).await.or(announced)),
            Action::Check => match attempts.checked(named_master(&core, &sentinels).await) {
                Action::Switch(named) => Some(named),
                _ => None,
            },
        };
        let Some(to) = to else { continue };
        let there = to.as_ref().is_some_and(|(h, p)| {
            is_at(core.redis().sentinel_primary().as_ref(), h, *p)
                && is_at(sub.sentinel_primary().as_ref(), h, *p)
        });
        if there && !holds.under_way() {
            // Already there (another sentinel's announcement of the same switch).
            continue;
        }
        if !holds.under_way() {
            begin(&core, &holds);
        }
        let within = core.config().connect_timeout;
        let was_astray = astray.is_some();
        astray = arrive(
            &core,
            &sub,
            &sentinels,
            &holds,
            to,
            within,
            &mut rx,
            &mut backlog,
        )
        .await;
        if let (Some((_, to)), false) = (&astray, was_astray) {
            log::warn!(
                "the connections reach {:?}, not the master the sentinels name \
                 ({to:?}), after {within:?}: lock commands go on, but no hold is \
                 confirmed until they reach it (tried again every {RETRY_WITHIN:?})",
                core.redis().sentinel_primary()
            );
        }
    }
}

/// How long a later try to reach the master the sentinels name may take (the watcher reads no
/// event meanwhile), and how long after a failed one the next begins.
const RETRY_WITHIN: Duration = Duration::from_secs(1);

/// Moves the command and subscriber connections to `to` (see [`move_to`], for at most
/// `within`) and ends the failover there, unless a failover of that master began meanwhile
/// (the events read in the meantime go to `backlog`), or the connections did not reach it:
/// then lock commands go on, but nothing confirms a hold until they do, and the next try is
/// returned.
#[allow(clippy::too_many_arguments)]
async fn arrive(
    core: &Core,
    sub: &SubscriberClient,
    sentinels: &Sentinels,
    holds: &FailoverHolds,
    to: Option<Addr>,
    within: Duration,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<(usize, Event)>,
    backlog: &mut VecDeque<(usize, Event)>,
) -> Option<(Instant, Option<Addr>)> {
    let there = move_to(core, sub, sentinels, to.clone(), within).await;
    // A failover of the master just reached may have begun meanwhile: then the holds stay in
    // doubt (its `+try-failover` is handled next), not confirmed there for a moment.
    while let Ok(e) = rx.try_recv() {
        backlog.push_back(e);
    }
    let reached = core.redis().sentinel_primary();
    if replacing(backlog.iter(), reached.as_ref()) {
        log::warn!(
            "a failover of the new master {reached:?} began while the client moved to it; the \
             holds stay in doubt"
        );
        return None;
    }
    if !there {
        log::debug!("the connections reach {reached:?}, not {to:?}; trying again");
        core.set_failover(false);
        return Some((Instant::now() + RETRY_WITHIN, to));
    }
    end(core, holds);
    None
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

/// The answer more than half of `total` gave.
fn majority(answers: &[(String, u16)], total: usize) -> Option<(String, u16)> {
    answers
        .iter()
        .find(|a| answers.iter().filter(|b| b == a).count() * 2 > total)
        .cloned()
}

/// `true` when one of `events` begins a failover of the master at `reached`.
fn replacing<'a>(
    events: impl IntoIterator<Item = &'a (usize, Event)>,
    reached: Option<&fred::types::config::Server>,
) -> bool {
    events.into_iter().any(|(_, e)| match e {
        Event::Began { of } => is_at(reached, &of.0, of.1),
        _ => false,
    })
}

fn is_at(server: Option<&fred::types::config::Server>, host: &str, port: u16) -> bool {
    server.is_some_and(|s| &*s.host == host && s.port == port)
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
    sub: &SubscriberClient,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_of_the_watched_master_are_read_and_others_ignored() {
        assert_eq!(
            parse("+try-failover", "master m 127.0.0.1 17001", "m"),
            Some(Event::Began {
                of: ("127.0.0.1".into(), 17001)
            })
        );
        assert_eq!(
            parse("+try-failover", "master other 127.0.0.1 1", "m"),
            None
        );
        assert_eq!(
            parse("+switch-master", "m 127.0.0.1 17001 127.0.0.1 17002", "m"),
            Some(Event::Switched {
                from: ("127.0.0.1".into(), 17001),
                to: ("127.0.0.1".into(), 17002)
            })
        );
        assert_eq!(
            parse("+switch-master", "mm 127.0.0.1 1 127.0.0.1 2", "m"),
            None
        );
        assert_eq!(
            parse("+switch-master", "m 127.0.0.1 1 127.0.0.1", "m"),
            None
        );
        assert_eq!(
            parse("-failover-abort-not-elected", "master m 127.0.0.1 1", "m"),
            Some(Event::Abandoned)
        );
        assert_eq!(
            parse(
                "-failover-abort-slave-timeout",
                "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1",
                "m"
            ),
            Some(Event::Abandoned)
        );
        assert_eq!(
            parse("+failover-end-for-timeout", "master m 127.0.0.1 1", "m"),
            Some(Event::Abandoned)
        );
        assert_eq!(
            parse("+reset-master", "master m 127.0.0.1 1", "m"),
            Some(Event::Reset)
        );
        assert_eq!(parse("+try-failover", "", "m"), None);
    }

    fn began(port: u16) -> Event {
        Event::Began {
            of: ("h".into(), port),
        }
    }

    fn switched(from: u16, to: u16) -> Event {
        Event::Switched {
            from: ("h".into(), from),
            to: ("h".into(), to),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failover_ends_with_the_switch_or_when_every_attempt_is_given_up() {
        let now = Instant::now();
        let mut a = Attempts::default();
        // Two sentinels try; one is not elected, the other switches.
        assert_eq!(a.on(0, began(1), now), Action::Begin);
        assert_eq!(a.on(1, began(1), now), Action::Nothing);
        assert_eq!(a.on(1, Event::Abandoned, now), Action::Nothing);
        assert_eq!(
            a.on(0, switched(1, 2), now),
            Action::Switch(Some(("h".into(), 2)))
        );
        assert!(a.since.is_none());
        // Both give up: the end comes with the last.
        assert_eq!(a.on(0, began(2), now), Action::Begin);
        assert_eq!(a.on(2, began(2), now), Action::Nothing);
        assert_eq!(a.on(0, Event::Abandoned, now), Action::Nothing);
        assert_eq!(a.on(2, Event::Abandoned, now), Action::End);
        // An abandon from a sentinel that never tried ends nothing.
        assert_eq!(a.on(1, Event::Abandoned, now), Action::Nothing);
    }

    /// Seen in a chaos run (two failovers 1 s apart): the sentinel that led the first one
    /// announced its switch (1 → 2) after another sentinel had begun replacing 2. That late
    /// announcement must not end the second failover.
    #[tokio::test(start_paused = true)]
    async fn a_late_switch_does_not_end_a_failover_of_the_new_master() {
        let now = Instant::now();
        let mut a = Attempts::default();
        assert_eq!(a.on(0, began(1), now), Action::Begin);
        // The other sentinels switch first (their configuration is updated).
        assert_eq!(
            a.on(1, switched(1, 2), now),
            Action::Switch(Some(("h".into(), 2)))
        );
        // Sentinel 1 begins replacing 2; sentinel 0 announces the first switch only now.
        assert_eq!(a.on(1, began(2), now), Action::Begin);
        assert_eq!(a.on(0, switched(1, 2), now), Action::Nothing);
        assert_eq!(a.on(2, switched(1, 2), now), Action::Nothing);
        assert!(a.since.is_some(), "still under way");
        // The second switch ends it.
        assert_eq!(
            a.on(2, switched(2, 3), now),
            Action::Switch(Some(("h".into(), 3)))
        );
        assert!(a.trying.is_empty());
        // A switch of a master nobody was replacing (its `+try-failover` missed) still moves.
        assert_eq!(
            a.on(0, switched(3, 4), now),
            Action::Switch(Some(("h".into(), 4)))
        );
    }

    fn at(port: u16) -> Option<Addr> {
        Some(("h".into(), port))
    }

    /// Issue 29, 6c: a `+reset-master` of a sentinel that is not replacing the master, heard
    /// mid-failover, used to clear every attempt and move to the master the sentinels named,
    /// which is still the one being replaced: the failover ended there.
    #[tokio::test(start_paused = true)]
    async fn a_reset_of_another_sentinel_does_not_end_a_failover_under_way() {
        let now = Instant::now();
        let mut a = Attempts::default();
        assert_eq!(a.on(0, began(1), now), Action::Begin);
        assert_eq!(a.on(1, Event::Reset, now), Action::Check);
        assert_eq!(
            a.checked(at(1)),
            Action::Nothing,
            "still naming the old master"
        );
        assert_eq!(a.checked(None), Action::Nothing, "no majority");
        assert!(a.since.is_some(), "still under way");
        assert_eq!(a.on(0, switched(1, 2), now), Action::Switch(at(2)));
        assert!(a.trying.is_empty());
    }

    /// The reset of the sentinel that was replacing the master ends its attempt: with none
    /// left, the client goes where the sentinels name (and the failover ends there).
    #[tokio::test(start_paused = true)]
    async fn a_reset_of_the_sentinel_replacing_the_master_ends_its_attempt() {
        let now = Instant::now();
        let mut a = Attempts::default();
        assert_eq!(a.on(0, began(1), now), Action::Begin);
        assert_eq!(a.on(1, began(1), now), Action::Nothing);
        assert_eq!(a.on(0, Event::Reset, now), Action::Check);
        assert_eq!(a.checked(at(1)), Action::Nothing, "sentinel 1 still tries");
        assert_eq!(a.on(1, Event::Reset, now), Action::Check);
        assert!(a.since.is_none());
        assert_eq!(a.checked(at(1)), Action::Switch(at(1)));
        // Without a failover, a reset is a look at where the master is.
        assert_eq!(a.on(2, Event::Reset, now), Action::Check);
        assert_eq!(a.checked(None), Action::Switch(None));
    }

    /// A lagged receiver (some of a sentinel's events missed, maybe its abort, maybe the
    /// switch) checks the master without giving up any attempt: the failover goes on unless
    /// the sentinels name another master (the switch was missed).
    #[tokio::test(start_paused = true)]
    async fn a_lagged_receiver_ends_a_failover_only_if_the_master_moved() {
        let now = Instant::now();
        let mut a = Attempts::default();
        assert_eq!(a.on(0, began(1), now), Action::Begin);
        assert_eq!(a.on(0, Event::Missed, now), Action::Check);
        assert_eq!(a.checked(at(1)), Action::Nothing);
        assert_eq!(a.on(2, Event::Missed, now), Action::Check);
        assert_eq!(a.checked(None), Action::Nothing);
        assert_eq!(a.trying.len(), 1, "the attempt is kept");
        assert!(a.since.is_some());
        // The switch was among the events missed.
        assert_eq!(a.on(0, Event::Missed, now), Action::Check);
        assert_eq!(a.checked(at(2)), Action::Switch(at(2)));
        assert!(a.trying.is_empty() && a.since.is_none());
        // Without a failover, a lag is a look at where the master is.
        assert_eq!(a.on(1, Event::Missed, now), Action::Check);
        assert_eq!(a.checked(at(2)), Action::Switch(at(2)));
    }

    #[test]
    fn a_failover_of_the_master_reached_keeps_the_holds_in_doubt() {
        let reached = fred::types::config::Server::new("h", 2);
        let late = [(0, switched(1, 2)), (1, began(2))];
        assert!(replacing(&late, Some(&reached)));
        let stale = [(0, switched(1, 2)), (1, began(1))];
        assert!(
            !replacing(&stale, Some(&reached)),
            "a failover of the old one"
        );
        assert!(!replacing(&late, None), "not connected");
        assert!(!replacing(&[], Some(&reached)));
    }

    #[test]
    fn the_master_is_the_one_most_sentinels_name() {
        let a = ("h".to_owned(), 1);
        let b = ("h".to_owned(), 2);
        assert_eq!(
            majority(&[a.clone(), a.clone(), b.clone()], 3),
            Some(a.clone())
        );
        assert_eq!(
            majority(&[a.clone(), b.clone()], 3),
            None,
            "no majority of three"
        );
        assert_eq!(
            majority(&[a.clone(), a.clone()], 3),
            Some(a.clone()),
            "one did not answer"
        );
        assert_eq!(majority(std::slice::from_ref(&a), 3), None);
        assert_eq!(majority(&[], 3), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_without_news_expires_after_the_cap() {
        let mut a = Attempts::default();
        let start = Instant::now();
        a.on(0, began(1), start);
        let cap = Duration::from_secs(30);
        tokio::time::advance(Duration::from_secs(29)).await;
        assert!(!a.expired(cap, Instant::now()));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(a.expired(cap, Instant::now()));
        assert!(a.trying.is_empty());
        assert!(!a.expired(cap, Instant::now()), "once");
        // The next attempt begins anew.
        assert_eq!(a.on(1, began(1), Instant::now()), Action::Begin);
    }
}
