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
/// or sent. An attempt in flight holds a few KiB (its future, the command's, fred's) until its
/// reply: ten thousand waiters starting at once would otherwise hold tens of MiB at the same
/// moment, which the allocator then keeps. A connection pipelines no faster with more: the
/// 64-owner bench row saturates the server with 64.
pub(crate) const ATTEMPTS_IN_FLIGHT: usize = 256;

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
