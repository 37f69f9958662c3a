//! The core every other part of a client shares: the command connection, the script registry and
//! the settings. It runs [`ScriptCall`]s (the few plain queries the locks need are in
//! `queries.rs`, over the same `send`), and maps every Redis failure to the crate's [`Error`],
//! naming the lock concerned.

use std::time::Duration;

use tokio::time::Instant;

use fred::{
    clients::Client as FredClient,
    interfaces::{ClientLike, KeysInterface, LuaInterface, ServerInterface},
    types::{config::Server, ClusterHash, CustomCommand, Key, Value},
};

use crate::{
    config::Config,
    conn::{
        asking::Redirects,
        cluster::{one_slot, slot_of, Messaging},
        connect::{self, Opened, Sentinels, Target},
        permissions::{Need, Permissions},
        replicas::{ReplicaSync, Synced},
        scripts::{ScriptCall, Scripts},
    },
    error::{Error, Failure, Result},
};

/// The command connection, the scripts and the settings of one client.
pub(crate) struct Core {
    id: String,
    redis: FredClient,
    scripts: Scripts,
    config: Config,
    clustered: bool,
    messaging: Messaging,
    /// Commands the server said at connect this user may not run (ACL DRYRUN).
    permissions: Permissions,
    replicas: ReplicaSync,
    /// Follows `MOVED` and `ASK` for every keyed command (see `asking`).
    redirects: Redirects,
    stall: Stall,
    /// Sentinel: the sentinels to watch for failovers (see `service::failover`).
    sentinels: Option<Sentinels>,
    /// `true` while the sentinels fail the master over: commands wait (at most one command
    /// timeout) for the switch, so that nothing is acquired on a master being replaced.
    failover: tokio::sync::watch::Sender<bool>,
}

/// Stalled-connection detection on the command connection: a command without a reply for
/// the bound (`Config::stalled_connection_timeout`) has every command behind it waiting with
/// it, so the connection is closed and replaced (fred's forced reconnection; its commands in
/// flight fail as on a lost connection). fred's own unresponsive check counts from the last
/// write, which a busy client renews all the time, so the crate times the command instead.
struct Stall {
    bound: Option<Duration>,
    /// (replacements started, replacements finished).
    progress: tokio::sync::watch::Sender<(u64, u64)>,
    /// When the last replacement started.
    last: parking_lot::Mutex<Option<Instant>>,
}

/// A failed [`Core::run_acquire`]: the error, and whether the script may have been sent (a
/// transient failure after sending leaves the acquisition's outcome unknown).
#[derive(Debug)]
pub(crate) struct AcquireFailure {
    pub(crate) error: Error,
    pub(crate) sent: bool,
}

impl Core {
    /// Connects the command connection and a subscriber connection (see [`connect`]), loads
    /// every script, and returns the core with the (initialised) subscriber client.
    pub(crate) async fn connect(target: Target<'_>, config: Config) -> Result<(Core, FredClient)> {
        config.validate()?;
        let Opened {
            redis,
            sub,
            clustered,
            sentinels,
        } = connect::open(target, &config).await?;
        let mut core = Core {
            id: uuid::Uuid::new_v4().to_string(),
            redis,
            scripts: Scripts::new(),
            replicas: ReplicaSync::new(&config, clustered, sentinels.clone()),
            redirects: Redirects::default(),
            stall: Stall {
                bound: config.get_stalled_connection_timeout(),
                progress: tokio::sync::watch::channel((0, 0)).0,
                last: parking_lot::Mutex::new(None),
            },
            config,
            clustered,
            messaging: Messaging {
                classic: true,
                sharded: false,
            },
            permissions: Permissions::unknown(),
            sentinels,
            failover: tokio::sync::watch::channel(false).0,
        };
        let ready = async {
            core.load_scripts().await?;
            core.messaging =
                connect::probe_messaging(&core.redis, &core.config, core.clustered).await;
            core.permissions = Permissions::probe(
                &core.redis,
                core.messaging,
                core.scripts.sha1(crate::conn::scripts::ScriptId::Acquire),
            )
            .await;
            core.replicas.prime(&core.redis).await;
            Ok::<(), Error>(())
        };
        if let Err(e) = ready.await {
            core.quit().await;
            let _ = sub.quit().await;
            return Err(e);
        }
        Ok((core, sub))
    }

    /// Sentinel: the sentinels to watch for failovers.
    pub(crate) fn sentinels(&self) -> Option<&Sentinels> {
        self.sentinels.as_ref()
    }

    /// The sentinels began (`true`) or ended (`false`) a failover of the master: while one is
    /// under way, every command waits for its end (at most one command timeout) before it is
    /// sent, and the replica-sync connections opened before it are not used again.
    pub(crate) fn set_failover(&self, under_way: bool) {
        self.replicas.master_changed();
        self.failover.send_replace(under_way);
    }

    /// Waits (at most one command timeout) while a Sentinel failover is under way. A command
    /// that waited the whole bound is sent anyway (to whatever master the connection reaches;
    /// the holds it makes start in doubt, see `service::watchdog::doubt`).
    async fn failover_over(&self) {
        if !*self.failover.borrow() {
            return;
        }
        let mut rx = self.failover.subscribe();
        let _ =
            tokio::time::timeout(self.config.timeout, rx.wait_for(|under_way| !under_way)).await;
    }

    /// What the server said at connect this user may not run.
    pub(crate) fn permissions(&self) -> &Permissions {
        &self.permissions
    }

    /// `true` when an acquisition sent now goes on the command connection behind the commands
    /// already handed to it (so it runs after them on the server): no failover holds
    /// commands back, and no replica sync sends it on a connection of its own.
    pub(crate) fn acquisitions_follow(&self) -> bool {
        !*self.failover.borrow() && self.replicas.on_shared_connection(&self.redis)
    }

    /// `true` on a Redis Cluster.
    pub(crate) fn is_clustered(&self) -> bool {
        self.clustered
    }

    /// How unlock messages travel.
    pub(crate) fn messaging(&self) -> Messaging {
        self.messaging
    }

    /// The command connection (the subscription registry follows its topology changes).
    pub(crate) fn redis(&self) -> &FredClient {
        &self.redis
    }

    /// This client's id: the `<client uuid>` part of every owner field.
    pub(crate) fn id(&self) -> &str {
        &self.id
    }

    pub(crate) fn config(&self) -> &Config {
        &self.config
    }

    /// Loads every script (`SCRIPT LOAD`, on every primary of a cluster), so the first calls
    /// need no `NOSCRIPT` round trip. Nodes that join later (a promoted replica, a migration
    /// target) get a script the first time a call meets `NOSCRIPT` there.
    async fn load_scripts(&self) -> Result<()> {
        let loads = self.scripts.sources().map(|source| async move {
            if self.clustered {
                self.redis.script_load_cluster::<Value, _>(source).await
            } else {
                self.redis.script_load::<Value, _>(source).await
            }
        });
        match futures::future::try_join_all(loads).await {
            Ok(_) => Ok(()),
            // A user that may not run SCRIPT LOAD can still run the scripts: each is then sent
            // with EVAL the first time (the NOSCRIPT path), which caches it on the server.
            Err(e) if e.details().starts_with("NOPERM") => {
                log::info!(
                    "SCRIPT LOAD refused for this user ({e:#}); scripts are sent on first use"
                );
                Ok(())
            }
            Err(e) => Err(Error::from_redis(e, "")),
        }
    }

    /// Runs a script call for the lock `lock` with `EVALSHA`; on `NOSCRIPT` sends it once with
    /// `EVAL`, which also caches it on the server for the next `EVALSHA`.
    ///
    /// On a cluster a call whose keys span slots is refused before it is sent. The `EVAL` after
    /// a `NOSCRIPT` is routed by the same first key, so it reaches the node that answered (the
    /// new owner after a failover or a migration), which then caches the script.
    pub(crate) async fn run(&self, call: ScriptCall, lock: &str) -> Result<Value> {
        self.run_on(&self.redis, &call, lock, true)
            .await
            .map(|(v, _)| v)
    }

    /// Runs an acquisition script and, where the master has replicas and replica sync is on
    /// (see `replicas`), makes sure it reached one: the script runs on a connection of its
    /// own, and if `acquired` says the reply is an acquisition, `WAIT` follows on the same
    /// connection. The caller undoes an acquisition that comes back [`Synced::Missing`]. The
    /// `WAIT` lasts the sync timeout, or less if the caller's `deadline` comes first.
    pub(crate) async fn run_acquire(
        &self,
        call: ScriptCall,
        lock: &str,
        deadline: Option<Instant>,
        acquired: impl FnOnce(&Value) -> bool + Send,
        barrier: &crate::conn::replicas::Barrier,
    ) -> std::result::Result<(Value, Synced), AcquireFailure> {
        // Boxed, as `run_on` is (type-layout depth of the callers' futures).
        let exposed: futures::future::BoxFuture<'_, _> = Box::pin(async move {
            let slot = self.slot_of_call(&call);
            // Before the checkout: a connection opened after a failover reaches the new master.
            self.failover_over().await;
            let checkout = match self.replicas.checkout(&self.redis, slot).await {
                // No connection to run it on (every one busy, or none could be opened):
                // nothing was sent, so the outcome is not ambiguous.
                Err(error) => return Err(AcquireFailure { error, sent: false }),
                Ok(None) => {
                    return self
                        .run(call, lock)
                        .await
                        .map(|v| (v, Synced::NotNeeded))
                        .map_err(|error| AcquireFailure { error, sent: true })
                }
                Ok(Some(c)) => c,
            };
            let mut checkout = checkout;
            checkout.expose(barrier);
            let value = match self.run_on(&checkout.client, &call, lock, true).await {
                Ok((v, asked)) => {
                    // Run on a migration's target after ASKING: the WAIT goes there too.
                    checkout.asked = asked;
                    v
                }
                Err(e) => {
                    // A reply that never came leaves the connection's state unknown. Close it
                    // and wait (bounded) for the server to answer the QUIT, which it reads after
                    // the script: the reconciliation that follows then reads the owner's count
                    // on the command connection only after the script ran (or never will).
                    if e.is_transient() {
                        self.replicas.close_before_reconcile(checkout).await;
                    } else {
                        self.replicas.give_back(checkout);
                    }
                    return Err(AcquireFailure {
                        error: e,
                        sent: true,
                    });
                }
            };
            if !acquired(&value) {
                self.replicas.give_back(checkout);
                return Ok((value, Synced::NotNeeded));
            }
            // Boxed: its `WAIT` is fred's request future (5 KiB), which an acquisition that needs
            // no sync would otherwise carry in its box too.
            let synced = Box::pin(self.replicas.wait(checkout, lock, deadline)).await;
            Ok((value, synced))
        });
        let outcome = exposed.await;
        // Completed (not dropped): nothing for a reconciliation to wait for.
        barrier.lock().take();
        outcome
    }

    /// Runs a script call on `redis` (the command connection, or a replica-sync connection).
    /// The reply, and the node an `ASK` sent the script to, if one did. `patient`: a
    /// `TRYAGAIN` is retried within the command timeout (else it fails at once).
    // Boxed: every script call goes through here, and the future of an application that awaits
    // a MultiLock would otherwise exceed the compiler's default type-layout depth.
    fn run_on<'a>(
        &'a self,
        redis: &'a FredClient,
        call: &'a ScriptCall,
        lock: &'a str,
        patient: bool,
    ) -> futures::future::BoxFuture<'a, Result<(Value, Option<Server>)>> {
        Box::pin(async move {
            if self.clustered && !one_slot(&call.keys) {
                return Err(Error::CrossSlot {
                    lock: lock.to_owned(),
                });
            }
            // Refused outright for this user (ACL DRYRUN at connect): nothing is sent.
            self.permissions.check(Need::Scripts, lock)?;
            if call.script.announces() {
                self.permissions.check(Need::Announce, lock)?;
            }
            // A master demoted by a failover answers READONLY (fred then reconnects, through the
            // sentinels, to the new master). A script that got READONLY wrote nothing (its first
            // write failed, and the script stopped there), so sending it again is safe; it is
            // retried within the command timeout and never surfaces as a lock error. So is one
            // that got TRYAGAIN (a slot being migrated holds some of its keys, not all: it did not
            // run; the migration moves the rest within moments).
            let deadline = Instant::now() + self.config.timeout.min(Duration::from_secs(60));
            let mut pause = Duration::from_millis(20);
            loop {
                match self.run_once(redis, call).await {
                    Err(e) if patient && is_try_again(&e) && Instant::now() + pause < deadline => {
                        log::debug!("lock {lock}: its slot is being migrated (TRYAGAIN); retrying");
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(250));
                    }
                    Err(e) if is_demoted(&e) && Instant::now() + pause < deadline => {
                        log::info!(
                            "lock {lock}: the server is no longer the master ({}); retrying on the \
                             new master",
                            e.details().split_whitespace().next().unwrap_or("READONLY")
                        );
                        tokio::time::sleep(pause).await;
                        pause = (pause * 2).min(Duration::from_millis(250));
                    }
                    // Still TRYAGAIN: transient (it did not run; the caller's retries go on).
                    Err(e) if is_try_again(&e) => {
                        return Err(Error::Timeout(Failure::with_source(
                            format!(
                                "lock {lock}: its slot is being migrated and some of the call's \
                                 keys are not there yet"
                            ),
                            e,
                        )))
                    }
                    other => return other.map_err(|e| Error::from_redis(e, lock)),
                }
            }
        })
    }

    /// The reply, and the node an `ASK` sent the script to, if one did.
    /// The slot of a call's first key on a cluster, where it routes the call; `None` elsewhere
    /// (nothing reads it there, and hashing the key twice a call was about 2 % of a lock +
    /// unlock's instructions).
    fn slot_of_call(&self, call: &ScriptCall) -> Option<u16> {
        if self.clustered {
            call.keys.first().map(slot_of)
        } else {
            None
        }
    }

    async fn run_once(
        &self,
        redis: &FredClient,
        call: &ScriptCall,
    ) -> std::result::Result<(Value, Option<Server>), fred::error::Error> {
        let slot = self.slot_of_call(call).unwrap_or(0);
        let with = |head: Value| {
            let mut args = Vec::with_capacity(2 + call.keys.len() + call.args.len());
            args.push(head);
            args.push(Value::from(call.keys.len() as i64));
            args.extend(call.keys.iter().map(|k| Value::from(k.clone())));
            args.extend(call.args.iter().cloned());
            args
        };
        let sha1 = self.scripts.sha1_value(call.script);
        let first = self.send(redis, "EVALSHA", slot, with(sha1)).await;
        match first {
            Err(e) if e.details().starts_with("NOSCRIPT") => {
                log::debug!(
                    "script {:?} missing on the server, sending it again",
                    call.script
                );
                let source = self.scripts.source(call.script);
                self.send(redis, "EVAL", slot, with(Value::from(source)))
                    .await
            }
            other => other,
        }
    }

    /// Sends one command for a key of `slot` on `redis`; on a cluster it follows `MOVED` and
    /// `ASK` itself (see `asking`). The reply, and the node an `ASK` sent it to, if one did.
    /// On the command connection, a command without a reply for the stall bound has the
    /// connection replaced (see [`Stall`]) and then waits on as before.
    pub(super) async fn send(
        &self,
        redis: &FredClient,
        name: &'static str,
        slot: u16,
        args: Vec<Value>,
    ) -> std::result::Result<(Value, Option<Server>), fred::error::Error> {
        self.failover_over().await;
        // A replica-sync connection checked out before a Sentinel failover may still reach the
        // old master (which answers as a master until the sentinels demote it): nothing is sent
        // there. The caller treats it as a failed attempt (its reconciliation reads the owner's
        // count on the command connection, which reaches the new master).
        if !self.clustered
            && redis.id() != self.redis.id()
            && redis.sentinel_primary() != self.redis.sentinel_primary()
        {
            return Err(fred::error::Error::new(
                fred::error::ErrorKind::IO,
                "a Sentinel failover moved the master; this connection reaches the old one \
                 (not sent)",
            ));
        }
        // Not boxed: its callers are (`run_on`), and a box here was a second allocation of
        // fred's request future (5 KiB) per command, copied in. The cluster's redirect handling
        // is boxed on its own: its future is several KiB more, and it nests deep enough that an
        // application's future over a MultiLock would exceed the compiler's default
        // type-layout depth.
        let call = async move {
            if self.clustered {
                let private = redis.id() != self.redis.id();
                Box::pin(
                    self.redirects
                        .send(redis, private, name, slot, args, self.config.timeout),
                )
                .await
            } else {
                redis
                    .custom(
                        CustomCommand::new_static(name, ClusterHash::FirstKey, false),
                        args,
                    )
                    .await
                    .map(|v| (v, None))
            }
        };
        let mut call = std::pin::pin!(call);
        match self.stall.bound {
            // fred's own command timeout, the command timeout, ends the command no later than
            // the bound (the bound is at most the command timeout, by default equal to it): its
            // timeout is the sign of a stall, and a timer of our own per command (two timer
            // wheel operations and clock reads, about a tenth of the crate's own instructions
            // per lock + unlock) would add nothing.
            Some(bound) if redis.id() == self.redis.id() && bound >= self.config.timeout => {
                match call.await {
                    Err(e) if *e.kind() == fred::error::ErrorKind::Timeout => {
                        self.replace_stalled(bound);
                        Err(e)
                    }
                    reply => reply,
                }
            }
            Some(bound) if redis.id() == self.redis.id() => {
                match tokio::time::timeout(bound, call.as_mut()).await {
                    // fred's own command timeout (at least the bound) came first.
                    Ok(Err(e)) if *e.kind() == fred::error::ErrorKind::Timeout => {
                        self.replace_stalled(bound);
                        Err(e)
                    }
                    Ok(reply) => reply,
                    Err(_) => {
                        self.replace_stalled(bound);
                        call.await
                    }
                }
            }
            _ => call.await,
        }
    }

    /// Closes and replaces the command connection (in the background; at most once per
    /// `bound`).
    fn replace_stalled(&self, bound: Duration) {
        {
            let mut last = self.stall.last.lock();
            if last.is_some_and(|t| t.elapsed() < bound) {
                return;
            }
            *last = Some(Instant::now());
        }
        log::warn!(
            "the command connection gave no reply for {bound:?}: treated as stalled, replacing it"
        );
        self.stall
            .progress
            .send_modify(|(started, _)| *started += 1);
        let (redis, progress) = (self.redis.clone(), self.stall.progress.clone());
        let within = self.config.connect_timeout;
        tokio::spawn(async move {
            let started = progress.borrow().0;
            let _ = tokio::time::timeout(within, redis.force_reconnection()).await;
            progress.send_modify(|(_, finished)| *finished = (*finished).max(started));
        });
    }

    /// Waits (at most `within`) until a replacement of a stalled command connection, if one
    /// is under way, has finished: commands sent after it go on the new connection.
    pub(crate) async fn connection_replaced(&self, within: Duration) {
        let mut rx = self.stall.progress.subscribe();
        let _ = tokio::time::timeout(within, rx.wait_for(|(s, f)| f >= s)).await;
    }

    /// `true` if the command connection was replaced as stalled at or after `at`: a command
    /// sent on it before then may reach the server after commands sent on the new one.
    pub(crate) fn replaced_since(&self, at: Instant) -> bool {
        self.stall.last.lock().is_some_and(|t| t >= at)
    }

    /// Runs a script that answers an array of integers (the renewal flags).
    pub(crate) async fn run_flags(&self, call: ScriptCall, lock: &str) -> Result<Vec<i64>> {
        let reply = self.run(call, lock).await?;
        flags(reply, lock)
    }

    /// [`run_flags`](Self::run_flags) for a call over several locks of one slot: `Ok(None)`
    /// at once when the slot is being migrated and only some of the keys have moved
    /// (`TRYAGAIN`): the caller splits the call (one lock's keys always move together).
    pub(crate) async fn run_flags_or_split(&self, call: ScriptCall) -> Result<Option<Vec<i64>>> {
        match self.run_on(&self.redis, &call, "", false).await {
            Ok((reply, _)) => flags(reply, "").map(Some),
            Err(Error::Timeout(f)) if f.fred_error().is_some_and(is_try_again) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The database this client works in (the keyspace event channels name it).
    pub(crate) fn database(&self) -> u8 {
        self.redis.client_config().database.unwrap_or(0)
    }

    /// Unlinks keys, ignoring the outcome (clean-up of unlock receipts).
    pub(crate) async fn unlink(&self, keys: Vec<Key>) {
        let _ = self.redis.unlink::<i64, _>(keys).await;
    }

    /// Closes the command connection (and the replica-sync connections).
    pub(crate) async fn quit(&self) {
        self.replicas.quit().await;
        self.redirects.quit().await;
        let _ = self.redis.quit().await;
    }
}

/// A reply of a server that is not (or no longer) a writable master: `READONLY` (a replica, e.g.
/// a master demoted by a failover), `MASTERDOWN` (a replica that lost its master), `LOADING`.
fn is_demoted(e: &fred::error::Error) -> bool {
    let d = e.details();
    ["READONLY", "MASTERDOWN", "LOADING"].iter().any(|p| {
        d.starts_with(p) || d.contains(&format!(": {p} ")) || d.contains(&format!("-{p} "))
    })
}

/// `TRYAGAIN`: a multi-key command on a slot being migrated, with some of its keys moved
/// already (not run).
fn is_try_again(e: &fred::error::Error) -> bool {
    let d = e.details();
    d.starts_with("TRYAGAIN") || d.contains(": TRYAGAIN") || d.contains("-TRYAGAIN")
}

fn flags(reply: Value, lock: &str) -> Result<Vec<i64>> {
    reply
        .convert::<Vec<i64>>()
        .map_err(|e| unexpected(lock, format!("flags expected: {e}")))
}

/// A `1`/`0` reply (every flag a script or a command answers: nothing else is a flag).
pub(crate) fn flag(reply: &Value, name: &str) -> Result<bool> {
    match reply.as_i64() {
        Some(1) => Ok(true),
        Some(0) => Ok(false),
        _ => Err(unexpected(name, format!("1 or 0 expected, got {reply:?}"))),
    }
}

/// An integer reply.
pub(crate) fn integer(reply: &Value, name: &str) -> Result<i64> {
    reply
        .as_i64()
        .ok_or_else(|| unexpected(name, format!("an integer expected, got {reply:?}")))
}

/// An error for a reply the scripts never give.
pub(crate) fn unexpected(lock: &str, what: impl std::fmt::Display) -> Error {
    Error::Redis(Failure::new(format!(
        "unexpected script reply for lock {lock}: {what}"
    )))
}

#[cfg(test)]
mod reply_tests {
    use super::*;

    #[test]
    fn replies_decode_strictly() {
        assert!(flag(&Value::Integer(1), "s").unwrap());
        assert!(!flag(&Value::Integer(0), "s").unwrap());
        assert!(flag(&Value::Integer(2), "s").is_err());
        assert!(flag(&Value::Null, "s").is_err());
        assert!(flag(&Value::from("x"), "s").is_err());
        assert_eq!(integer(&Value::Integer(-3), "s").unwrap(), -3);
        assert!(integer(&Value::Null, "s").is_err());
    }
}
