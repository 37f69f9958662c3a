//! The crate's own handling of cluster redirections (`MOVED`, `ASK`), for every keyed command it
//! sends (scripts and the few plain queries).
//!
//! Why not fred's: fred follows an `ASK` by writing `ASKING` to the target and reading the
//! next frame of that connection as its reply. On a multiplexed connection with other replies
//! still due, that frame belongs to another command, and the redirected command fails
//! (`Max attempts reached`) or the replies of that connection are handed to the wrong callers.
//! A lock whose slot stays in its `ASK` phase (keys moved by `MIGRATE`, the slot not yet
//! assigned) then got no renewal through, and lost its hold.
//!
//! So the command connection (and every connection cloned from it) is configured with
//! `max_redirections = 0` (`core.rs`; a per-command 0 means "inherit" in fred): fred still
//! refreshes its slot table on a `MOVED` (and then fails the command), and fails an `ASK`
//! without following it.
//! [`Redirects::send`] then looks at the slot: if the node that owns it reports it `MIGRATING`
//! (`CLUSTER NODES`), the command goes to the target after `ASKING`, both on a private
//! connection that nobody else writes to in between; otherwise (a `MOVED`, the table now
//! refreshed) it is sent again by slot. A `NOSCRIPT` from the target is answered by the
//! caller's `EVAL`, which takes the same path.

use std::time::Duration;

use fred::{
    clients::Client as FredClient,
    interfaces::{ClientLike, ClusterInterface},
    types::{config::Options, config::Server, ClusterHash, CustomCommand, Value},
};
use tokio::{sync::Mutex, time::Instant};

/// The pauses between the resends of a command redirected again and again (a failover the
/// nodes do not agree on yet), within the command timeout.
const MIN_PAUSE: Duration = Duration::from_millis(10);
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// The private connection `ASK`-redirected commands run on (opened on first use).
#[derive(Default)]
pub(crate) struct Redirects {
    asking: Mutex<Option<FredClient>>,
}

/// fred's error for a redirection it was told not to follow.
fn refused_redirect(e: &fred::error::Error) -> bool {
    e.details().contains("Too many redirections")
}

fn script(name: &str) -> bool {
    matches!(name, "EVALSHA" | "EVAL")
}

fn command(name: &'static str, slot: u16) -> CustomCommand {
    CustomCommand::new_static(name, ClusterHash::Custom(slot), false)
}

impl Redirects {
    /// Sends `name args` for a key of `slot` through `redis` (a cluster client), following
    /// `MOVED` and `ASK` as described in the module doc. `private`: `redis` is used by this
    /// call alone (a replica-sync connection), so `ASKING` goes on it, and the `WAIT` that may
    /// follow reaches the node that ran the command. The reply, and the node an `ASK` sent the
    /// command to, if one did.
    pub(crate) async fn send(
        &self,
        redis: &FredClient,
        private: bool,
        name: &'static str,
        slot: u16,
        args: Vec<Value>,
        timeout: Duration,
    ) -> Result<(Value, Option<Server>), fred::error::Error> {
        let options = Options {
            // A script is not idempotent: fred must not write it again after a reconnection
            // (e.g. of a stalled connection) once it was written.
            max_attempts: script(name).then_some(1),
            ..Default::default()
        };
        let deadline = Instant::now() + timeout;
        let mut pause = Duration::ZERO;
        loop {
            let outcome = redis
                .with_options(&options)
                .custom::<Value, _>(command(name, slot), args.clone())
                .await;
            match outcome {
                Err(e) if refused_redirect(&e) => {
                    if let Some(target) = migration_target(redis, slot).await {
                        let args = args.clone();
                        match self
                            .send_asking(redis, private, &target, name, slot, args, timeout)
                            .await
                        {
                            // The slot was assigned meanwhile: by slot again, below.
                            Err(e) if refused_redirect(&e) => {}
                            other => return other.map(|v| (v, Some(target))),
                        }
                    }
                    // A MOVED: fred refreshed its table; send it again by slot, at once the
                    // first time, then after a pause (during a failover the nodes may take a
                    // moment to agree on the new owner).
                    if Instant::now() + pause >= deadline {
                        return Err(fred::error::Error::new(
                            fred::error::ErrorKind::Timeout,
                            format!(
                                "slot {slot} was still redirected after {timeout:?} (the \
                                 cluster did not settle on its owner)"
                            ),
                        ));
                    }
                    tokio::time::sleep(pause).await;
                    pause = (pause * 2).clamp(MIN_PAUSE, MAX_PAUSE);
                }
                other => return other.map(|v| (v, None)),
            }
        }
    }

    /// `ASKING` then the command, to `target`: on `redis` if it is `private`, else on this
    /// client's `ASK` connection (one command at a time, so nothing comes in between).
    #[allow(clippy::too_many_arguments)]
    async fn send_asking(
        &self,
        redis: &FredClient,
        private: bool,
        target: &Server,
        name: &'static str,
        slot: u16,
        args: Vec<Value>,
        timeout: Duration,
    ) -> Result<Value, fred::error::Error> {
        let options = Options {
            cluster_node: Some(target.clone()),
            max_attempts: script(name).then_some(1),
            timeout: Some(timeout),
            ..Default::default()
        };
        if private {
            let pinned = redis.with_options(&options);
            pinned
                .custom::<Value, Value>(command("ASKING", slot), Vec::new())
                .await?;
            return pinned.custom::<Value, _>(command(name, slot), args).await;
        }
        let mut guard = tokio::time::timeout(timeout, self.asking.lock())
            .await
            .map_err(|_| {
                fred::error::Error::new(
                    fred::error::ErrorKind::Timeout,
                    "the ASK connection stayed busy",
                )
            })?;
        let client = match guard.as_ref() {
            Some(c) => c.clone(),
            None => {
                let c = redis.clone_new();
                match tokio::time::timeout(timeout, c.init()).await {
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => return Err(e),
                    Err(_) => {
                        let _ = c.quit().await;
                        return Err(fred::error::Error::new(
                            fred::error::ErrorKind::Timeout,
                            "could not open the ASK connection in time",
                        ));
                    }
                }
                *guard = Some(c.clone());
                c
            }
        };
        let pinned = client.with_options(&options);
        let result = async {
            pinned
                .custom::<Value, Value>(command("ASKING", slot), Vec::new())
                .await?;
            pinned.custom::<Value, _>(command(name, slot), args).await
        }
        .await;
        if let Err(e) = &result {
            if matches!(
                e.kind(),
                fred::error::ErrorKind::Timeout | fred::error::ErrorKind::IO
            ) {
                // A reply still due would pair the next ASKING with the wrong command.
                let _ = guard
                    .take()
                    .map(|c| tokio::spawn(async move { c.quit().await }));
            }
        }
        result
    }

    /// Closes the private connection.
    pub(crate) async fn quit(&self) {
        if let Some(c) = self.asking.lock().await.take() {
            let _ = c.quit().await;
        }
    }
}

/// The node `slot` is migrating to, as the node that owns it (in fred's table) reports it;
/// `None` when it is not migrating (or the owner cannot tell).
async fn migration_target(redis: &FredClient, slot: u16) -> Option<Server> {
    let owner = redis.cached_cluster_state()?.get_server(slot)?.clone();
    let nodes: String = redis
        .with_options(&Options {
            cluster_node: Some(owner.clone()),
            ..Default::default()
        })
        .custom(command("CLUSTER", slot), vec!["NODES"])
        .await
        .ok()?;
    let (id, _) = migrating_to(&nodes, slot)?;
    let addr = address_of(&nodes, &id)?;
    let (host, port) = addr.rsplit_once(':')?;
    let host = if host.is_empty() {
        owner.host.to_string()
    } else {
        host.to_string()
    };
    Some(Server::new(host, port.parse().ok()?))
}

/// In a `CLUSTER NODES` text, the id of the node the answering node (`myself`) migrates `slot`
/// to (`[slot->-id]`), and the answering node's id.
fn migrating_to(nodes: &str, slot: u16) -> Option<(String, String)> {
    let line = nodes.lines().find(|l| {
        l.split_whitespace()
            .nth(2)
            .is_some_and(|f| f.contains("myself"))
    })?;
    let mine = line.split_whitespace().next()?.to_owned();
    let marker = format!("[{slot}->-");
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(&marker)?.strip_suffix(']'))
        .map(|id| (id.to_owned(), mine))
}

/// The `host:port` of node `id` in a `CLUSTER NODES` text.
fn address_of(nodes: &str, id: &str) -> Option<String> {
    nodes.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        if f.next()? != id {
            return None;
        }
        let addr = f.next()?;
        Some(addr.split(['@', ',']).next()?.to_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NODES: &str = "\
aaa 127.0.0.1:7001@17001 myself,master - 0 0 1 connected 0-5460 [2994->-bbb]
bbb 127.0.0.1:7002@17002,host master - 0 0 2 connected 5461-10922 [2994-<-aaa]
ccc 127.0.0.1:7003@17003 master - 0 0 3 connected 10923-16383
";

    #[test]
    fn the_migration_target_is_read_from_cluster_nodes() {
        assert_eq!(
            migrating_to(NODES, 2994),
            Some(("bbb".to_owned(), "aaa".to_owned()))
        );
        assert_eq!(migrating_to(NODES, 2995), None);
        assert_eq!(address_of(NODES, "bbb").as_deref(), Some("127.0.0.1:7002"));
        assert_eq!(address_of(NODES, "ddd"), None);
    }

    #[test]
    fn only_a_refused_redirection_is_one() {
        let e = fred::error::Error::new(fred::error::ErrorKind::Routing, "Too many redirections.");
        assert!(refused_redirect(&e));
        let e = fred::error::Error::new(fred::error::ErrorKind::Timeout, "Request timed out.");
        assert!(!refused_redirect(&e));
    }
}
