//! The acquisition machinery every queueing and waiting kind shares: the one acquire engine
//! ([`engine`]) and its waiting loops, one owner's hold and its calls ([`hold`]), the back-off
//! schedules ([`backoff`]), and the per-client acquisition state: the owner ledger
//! ([`ledger`]), the releases in flight ([`pending`]), the local wait lines ([`queue`]) and
//! their hand-off policy ([`handoff`]).

pub(crate) mod backoff;
pub(crate) mod engine;
pub(crate) mod handoff;
pub(crate) mod hold;
pub(crate) mod ledger;
pub(crate) mod pending;
pub(crate) mod queue;

use std::sync::Arc;

use crate::config::LocalHandOff;

/// What a client keeps of its own acquisitions, one value the client holds and every hold
/// reaches through it: the owners' hold counts, the releases handed to the background, the
/// local hand-off queues.
pub(crate) struct Acquisitions {
    pub(crate) ledgers: ledger::Ledgers,
    pub(crate) pending: Arc<pending::PendingReleases>,
    pub(crate) queues: Arc<queue::LocalQueues>,
}

impl Acquisitions {
    pub(crate) fn new(hand_off: LocalHandOff) -> Self {
        Acquisitions {
            ledgers: Default::default(),
            pending: Default::default(),
            queues: Arc::new(queue::LocalQueues::new(hand_off)),
        }
    }
}
