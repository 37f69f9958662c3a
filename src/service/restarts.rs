//! Knowing when the server restarted (for RedLock's delayed-restart rule).
//!
//! A Redis node that restarts without its data can grant a lock that a RedLock holder still
//! counts on that node; the published algorithm's safety argument needs such a node to stay
//! out for one lease before it takes part again. The client remembers the server's `run_id`
//! (`INFO server`); from a connection error until the `run_id` has been read again after the
//! reconnect the node is *unverified*, and once a different `run_id` is seen the restart time is
//! recorded. [`RedLock`](crate::RedLock) does not count an unverified node, nor one restarted
//! less than its lease ago. Standalone servers only (a cluster's nodes are not RedLock parts).

use std::sync::Arc;

use fred::interfaces::{ClientLike, EventInterface};
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::conn::core::Core;

#[derive(Debug, Default)]
struct State {
    run_id: Option<String>,
    /// A connection error was seen and the `run_id` not read again since.
    unverified: bool,
    /// When the connection was lost (the first error since the last verification).
    down_since: Option<Instant>,
    /// The node restarted: when it went down, as far as this client can tell. It may vote
    /// again one lease after that (a node that stayed down a whole lease votes at once).
    restarted_at: Option<Instant>,
}

/// What the client knows of the server's restarts.
pub(crate) struct Restarts {
    state: Arc<Mutex<State>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn run_id_of(info: &str) -> Option<String> {
    info.lines()
        .find_map(|l| l.strip_prefix("run_id:"))
        .map(|s| s.trim().to_owned())
}

async fn read_run_id(core: &Core) -> Option<String> {
    let info: String = core
        .redis()
        .info(Some(fred::types::InfoKind::Server))
        .await
        .ok()?;
    run_id_of(&info)
}

impl Restarts {
    pub(crate) async fn start(core: Arc<Core>) -> Self {
        let state = Arc::new(Mutex::new(State::default()));
        if core.is_clustered() {
            return Self {
                state,
                tasks: Vec::new(),
            };
        }
        state.lock().run_id = read_run_id(&core).await;
        let mut errors = core.redis().error_rx();
        let on_error = {
            let state = state.clone();
            tokio::spawn(async move {
                while let Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) =
                    errors.recv().await
                {
                    let mut s = state.lock();
                    if !s.unverified {
                        s.unverified = true;
                        s.down_since = Some(Instant::now());
                    }
                }
            })
        };
        let mut reconnects = core.redis().reconnect_rx();
        let on_reconnect = {
            let state = state.clone();
            tokio::spawn(async move {
                while let Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) =
                    reconnects.recv().await
                {
                    {
                        let mut s = state.lock();
                        if !s.unverified {
                            s.unverified = true;
                            s.down_since = Some(Instant::now());
                        }
                    }
                    let Some(now_id) = read_run_id(&core).await else {
                        continue; // stays unverified until a read succeeds
                    };
                    let mut s = state.lock();
                    if s.run_id.as_deref().is_some_and(|old| old != now_id) {
                        log::warn!(
                            "the Redis server restarted (run_id changed); RedLock does not count \
                             it until one lease has passed"
                        );
                        s.restarted_at = s.down_since.or_else(|| Some(Instant::now()));
                    }
                    s.run_id = Some(now_id);
                    s.unverified = false;
                    s.down_since = None;
                }
            })
        };
        Self {
            state,
            tasks: vec![on_error, on_reconnect],
        }
    }

    /// `true` when the node may take part in a RedLock with this `lease`: verified since its
    /// last connection error, and, if it restarted, down at least `lease` before now.
    pub(crate) fn may_vote(&self, lease: std::time::Duration) -> bool {
        let s = self.state.lock();
        !s.unverified && s.restarted_at.is_none_or(|t| Instant::now() >= t + lease)
    }
}

impl Drop for Restarts {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_run_id_is_read_from_info_server() {
        let info = "# Server\r\nredis_version:7.0.15\r\nrun_id:abc123\r\ntcp_port:1\r\n";
        assert_eq!(run_id_of(info).as_deref(), Some("abc123"));
        assert_eq!(run_id_of("# Server\r\n"), None);
    }
}
