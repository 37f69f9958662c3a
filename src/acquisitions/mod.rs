//! What a client keeps of its own acquisitions, below the client and above the services: the
//! owner ledger ([`ledger`]), the releases handed to the background ([`pending`]), the local
//! wait lines ([`line`](mod@line)) and their hand-off policy ([`handoff`]). Nothing here sends a
//! command: holds and the engine (`crate::engine`) act, and tell this state what happened.

#[cfg(test)]
mod fleet;
pub(crate) mod handoff;
pub(crate) mod ledger;
pub(crate) mod line;
pub(crate) mod pending;

use std::sync::Arc;

use tokio::sync::Semaphore;

use crate::config::LocalHandOff;

/// The most acquisition attempts (of locks and synchronizers) one client has in flight at once;
/// the others wait for a turn, first come first served, before anything of them is allocated
/// or sent. An attempt in flight holds about 7 KiB until its reply (fred's request future alone
/// is 5 KiB), freed then; the small long-lived allocations made meanwhile (a waiter's line, its
/// subscription) split those freed blocks, and the allocator keeps what is left of them. Ten
/// thousand waiters parked at once (glibc, lock-peer): 2.64 KB of RSS each with 256 turns,
/// 2.29 with 128, 2.13 with 64, 2.06 with 32. A connection pipelines no faster with more: 64
/// and 256 turns ran 64- and 128-owner lock + unlock loops alike (within 2 %), 32 about 5 %
/// slower.
pub(crate) const ATTEMPTS_IN_FLIGHT: usize = 64;

/// What a client keeps of its own acquisitions, one value the client holds and every hold
/// reaches through it: the owners' hold counts, the releases handed to the background, the
/// local wait lines, the turns of attempts in flight.
pub(crate) struct Acquisitions {
    pub(crate) ledgers: ledger::Ledgers,
    pub(crate) pending: Arc<pending::PendingReleases>,
    pub(crate) lines: Arc<line::WaitLines>,
    /// [`ATTEMPTS_IN_FLIGHT`] turns; an attempt holds one while it runs.
    pub(crate) attempts: Semaphore,
}

impl Acquisitions {
    pub(crate) fn new(hand_off: LocalHandOff) -> Self {
        Acquisitions {
            ledgers: Default::default(),
            pending: Default::default(),
            lines: Arc::new(line::WaitLines::new(hand_off)),
            attempts: Semaphore::new(ATTEMPTS_IN_FLIGHT),
        }
    }
}
