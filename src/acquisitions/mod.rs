//! What a client keeps of its own acquisitions, below the client and above the services: the
//! owner ledger ([`ledger`]), the releases handed to the background ([`pending`]), the local
//! wait lines ([`line`](mod@line)) and their hand-off policy ([`handoff`]). Nothing here sends a
//! command: holds and the engine (`lock::acquire`) act, and tell this state what happened.

#[cfg(test)]
mod fleet;
pub(crate) mod handoff;
pub(crate) mod ledger;
pub(crate) mod line;
pub(crate) mod pending;

use std::sync::Arc;

use crate::config::LocalHandOff;

/// What a client keeps of its own acquisitions, one value the client holds and every hold
/// reaches through it: the owners' hold counts, the releases handed to the background, the
/// local wait lines.
pub(crate) struct Acquisitions {
    pub(crate) ledgers: ledger::Ledgers,
    pub(crate) pending: Arc<pending::PendingReleases>,
    pub(crate) lines: Arc<line::WaitLines>,
}

impl Acquisitions {
    pub(crate) fn new(hand_off: LocalHandOff) -> Self {
        Acquisitions {
            ledgers: Default::default(),
            pending: Default::default(),
            lines: Arc::new(line::WaitLines::new(hand_off)),
        }
    }
}
