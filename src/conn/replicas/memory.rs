//! What a replica count means (pure, unit tested): a master that had replicas online in the
//! last [`REPLICAS_REMEMBERED`] and shows none now has lost them for now, not become a lone
//! server; a promoted Sentinel master is judged by the replicas still alive of those it took
//! over ([`Memory`], [`Wanted`]).

use std::{collections::HashMap, time::Duration};

use fred::types::config::Server;
use tokio::time::Instant;

/// A replica count of 0 is read again after this long.
pub(crate) const ZERO_RECHECK: Duration = Duration::from_secs(1);

/// How long after replicas were last seen online a count of 0 still means "replicas gone for
/// now", not "a lone server": acquisitions keep wanting one acknowledgement (and fail
/// `NotReplicated` without one). A replica that lost its link can still be promoted for a
/// while (Sentinel: ten times `down-after-milliseconds`, 300 s by default; Cluster: the
/// replica validity factor times the node timeout, 150 s by default), and an acquisition no
/// replica has would be lost with that failover.
pub(crate) const REPLICAS_REMEMBERED: Duration = Duration::from_secs(600);

/// A master, as far as the cache tells them apart: `None` for a standalone server (one master),
/// the current master's address for Sentinel, the slot owner's for a cluster.
pub(crate) type Master = Option<Server>;

/// When a master last had a replica online (see [`Memory`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Seen {
    at: Instant,
    /// Taken over from the master this one replaced (Sentinel): those replicas become this
    /// master's once they attach to it, and only those still alive will.
    inherited: bool,
}

/// What the replica count of a master means, beyond the count read now: a master that had
/// replicas online in the last [`REPLICAS_REMEMBERED`] and shows none now has lost them for
/// now (stopped, cut off: one may still be promoted without what it missed), not a lone
/// server, so one acknowledgement is still wanted (the chaos runner's `lag-kill` fault).
///
/// A master is judged by its own replicas. On a cluster, each master by those it showed. On
/// a standalone or Sentinel deployment, by those of the master the command connection reaches
/// now: reaching another master (a Sentinel failover, or one back) forgets the others. A
/// master promoted in place of one that had replicas takes that memory over, marked
/// inherited: its replicas are the same servers (the sentinels reconfigure them to it), and
/// until they attach, an acquisition there is on no replica. Whether any of them can still
/// attach is asked of the sentinels ([`Wanted::Ask`]): when none of the replicas they list
/// for it is alive (one master and one replica, the old master gone for good), the promoted
/// master is a lone server at once, as with Redisson, instead of refusing every acquisition
/// `NotReplicated` for the whole memory.
#[derive(Debug, Default)]
pub(super) struct Memory {
    /// When each master last had a replica online.
    seen: HashMap<Master, Seen>,
    /// Standalone, Sentinel: the master the command connection reached last.
    reached: Option<Master>,
    /// Sentinel: whether some replica the sentinels list for the master reached now is alive,
    /// and when that was asked (`alive` may be a guess while the question is in flight).
    alive: Option<(Master, bool, Instant)>,
}

/// What an acquisition wants of the replicas, before the sentinels may have to be asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wanted {
    /// This many acknowledgements (1 at most is waited for; 0: no `WAIT`).
    Count(u64),
    /// Ask the sentinels whether the inherited replicas are alive (see [`Memory::answered`]);
    /// `meanwhile` is what to want without waiting for the answer (`None`: wait for it).
    Ask { meanwhile: Option<u64> },
}

impl Memory {
    /// The command connection reaches `master` (standalone, Sentinel).
    pub(super) fn reached(&mut self, master: &Master, now: Instant) {
        if self.reached.as_ref() == Some(master) {
            return;
        }
        let before = self.reached.replace(master.clone());
        let recent = before
            .and_then(|b| self.seen.get(&b).copied())
            .filter(|s| now.saturating_duration_since(s.at) < REPLICAS_REMEMBERED);
        self.seen.clear();
        self.alive = None;
        if let Some(s) = recent {
            let inherited = Seen {
                at: s.at,
                inherited: true,
            };
            self.seen.insert(master.clone(), inherited);
        }
    }

    /// What an acquisition on `master` wants, with `n` replicas online there now.
    pub(super) fn wanted(&mut self, master: &Master, n: u64, now: Instant) -> Wanted {
        if n > 0 {
            let own = Seen {
                at: now,
                inherited: false,
            };
            self.seen.insert(master.clone(), own);
            return Wanted::Count(n);
        }
        let Some(seen) = self.seen.get(master).copied() else {
            return Wanted::Count(0);
        };
        if now.saturating_duration_since(seen.at) >= REPLICAS_REMEMBERED {
            self.seen.remove(master);
            return Wanted::Count(0);
        }
        if !seen.inherited {
            return Wanted::Count(1);
        }
        match &self.alive {
            Some((m, true, at)) if m == master => {
                if now.saturating_duration_since(*at) < ZERO_RECHECK {
                    Wanted::Count(1)
                } else {
                    // Stamped now, so one question runs at a time.
                    self.alive = Some((master.clone(), true, now));
                    Wanted::Ask { meanwhile: Some(1) }
                }
            }
            _ => Wanted::Ask { meanwhile: None },
        }
    }

    /// The sentinels' answer for `master`: `Some(true)` when a replica they list for it is
    /// alive, `Some(false)` when none is (it is a lone server from now on), `None` when none
    /// of them answered (taken as alive, asked again later). Returns what to want.
    pub(super) fn answered(&mut self, master: &Master, alive: Option<bool>, now: Instant) -> u64 {
        if alive == Some(false) {
            if self.seen.get(master).is_some_and(|s| s.inherited) {
                self.seen.remove(master);
            }
            if self.alive.as_ref().is_some_and(|(m, _, _)| m == master) {
                self.alive = None;
            }
            return u64::from(self.seen.contains_key(master));
        }
        self.alive = Some((master.clone(), true, now));
        u64::from(self.seen.contains_key(master))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(port: u16) -> Master {
        Some(Server::new("127.0.0.1", port))
    }

    /// The lag-kill lesson: a master that had replicas and lost them still wants one
    /// acknowledgement, for [`REPLICAS_REMEMBERED`]; a lone server wants none.
    #[tokio::test(start_paused = true)]
    async fn a_master_that_lost_its_replicas_still_wants_an_acknowledgement() {
        let m = server(7001);
        let mut memory = Memory::default();
        memory.reached(&m, Instant::now());
        assert_eq!(
            memory.wanted(&m, 0, Instant::now()),
            Wanted::Count(0),
            "lone"
        );
        assert_eq!(memory.wanted(&m, 2, Instant::now()), Wanted::Count(2));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(memory.wanted(&m, 0, Instant::now()), Wanted::Count(1));
        tokio::time::advance(REPLICAS_REMEMBERED - Duration::from_secs(2)).await;
        assert_eq!(memory.wanted(&m, 0, Instant::now()), Wanted::Count(1));
        // Reached again (the same master): nothing forgotten.
        memory.reached(&m, Instant::now());
        assert_eq!(memory.wanted(&m, 0, Instant::now()), Wanted::Count(1));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert_eq!(
            memory.wanted(&m, 0, Instant::now()),
            Wanted::Count(0),
            "forgotten"
        );
    }

    /// Issue 29: a master promoted in place of one that had replicas is judged by them as
    /// they are now: while one the sentinels list is alive (it will attach), one
    /// acknowledgement is wanted (asked again every [`ZERO_RECHECK`]); when none is (one
    /// master and one replica, the old master gone), it is a lone server at once.
    #[tokio::test(start_paused = true)]
    async fn a_promoted_master_is_judged_by_the_replicas_still_alive() {
        let (old, new) = (server(7001), server(7002));
        let mut memory = Memory::default();
        memory.reached(&old, Instant::now());
        assert_eq!(memory.wanted(&old, 1, Instant::now()), Wanted::Count(1));

        // 1 + 1, the old master killed for good.
        memory.reached(&new, Instant::now());
        assert_eq!(
            memory.wanted(&new, 0, Instant::now()),
            Wanted::Ask { meanwhile: None }
        );
        assert_eq!(memory.answered(&new, Some(false), Instant::now()), 0);
        assert_eq!(
            memory.wanted(&new, 0, Instant::now()),
            Wanted::Count(0),
            "lone"
        );

        // 1 + 2: the other replica is alive and attaching.
        let mut memory = Memory::default();
        memory.reached(&old, Instant::now());
        memory.wanted(&old, 2, Instant::now());
        memory.reached(&new, Instant::now());
        assert_eq!(
            memory.wanted(&new, 0, Instant::now()),
            Wanted::Ask { meanwhile: None }
        );
        assert_eq!(memory.answered(&new, Some(true), Instant::now()), 1);
        assert_eq!(memory.wanted(&new, 0, Instant::now()), Wanted::Count(1));
        tokio::time::advance(ZERO_RECHECK).await;
        assert_eq!(
            memory.wanted(&new, 0, Instant::now()),
            Wanted::Ask { meanwhile: Some(1) },
            "asked again, in the background"
        );
        assert_eq!(
            memory.wanted(&new, 0, Instant::now()),
            Wanted::Count(1),
            "once"
        );
        // No sentinel answers: still wanted.
        assert_eq!(memory.answered(&new, None, Instant::now()), 1);
        // It attached: the master's own replica from now on (no more questions).
        assert_eq!(memory.wanted(&new, 1, Instant::now()), Wanted::Count(1));
        tokio::time::advance(ZERO_RECHECK * 2).await;
        assert_eq!(memory.wanted(&new, 0, Instant::now()), Wanted::Count(1));

        // A failover back, the other server gone: judged afresh (it was a replica meanwhile).
        memory.reached(&old, Instant::now());
        assert_eq!(
            memory.wanted(&old, 0, Instant::now()),
            Wanted::Ask { meanwhile: None }
        );
        assert_eq!(memory.answered(&old, Some(false), Instant::now()), 0);
        assert_eq!(memory.wanted(&old, 0, Instant::now()), Wanted::Count(0));
        // A master reached from one without replicas inherits nothing.
        memory.reached(&new, Instant::now());
        assert_eq!(memory.wanted(&new, 0, Instant::now()), Wanted::Count(0));
    }
}
