//! The acquisition: the one acquire engine ([`engine`]) that runs every [`waiter`] (a lock's
//! claim, a synchronizer's attempt) through the same wait, retry, undo and cancel shell, its
//! sleeping between attempts ([`sleep`]), and one owner's claim to one lock with every call
//! made for it ([`claim`]).

pub(crate) mod attempt;
pub(crate) mod claim;
pub(crate) mod engine;
pub(crate) mod sleep;
pub(crate) mod waiter;
