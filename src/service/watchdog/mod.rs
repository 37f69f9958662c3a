//! The renewal service ("watchdog"): one per client, over a map of the holds its guards stand
//! for, renewed every `lock_watchdog_timeout / 3` by one timer task while a part taken without a
//! lease remains, and the connection-aware state of every hold (held, in doubt, lost).
//!
//! A *hold* is one owner's hold of one lock: in Redis one field, one count, one TTL; here its
//! *parts* (each acquisition a guard stands for, renewed or leased) and one loss signal every
//! guard of it watches. It lives as long as its longest part ([`Need`]: what a release that
//! leaves some parts sets the TTL to).
//!
//! The watchdog does not know any lock's key layout: each hold brings its [`RenewalShape`] (the
//! renewal script, the lock's keys for one entry, and how an entry lists its owner).
//!
//! Its rooms, lowest first (none imports one beside it or above it):
//! - [`loss`]: the [`LossSignal`] a holder watches and the deadline rule;
//! - [`shape`]: the renewal wire shapes ([`RenewalShape`], [`Layout`], [`renewal_call`]);
//! - [`state`]: the state the rooms above share: the holds by [`HoldKey`] with their parts,
//!   the doubts' bookkeeping;
//! - [`run`]: one renewal run (collect → batch → send → apply);
//! - [`doubt`]: the listener of the connection's events that puts holds in doubt, the leased
//!   holds' check, what a Sentinel failover does to the holds ([`FailoverHolds`]);
//! - [`handle`]: the [`Watchdog`] handle the client keeps, and the registry's operations
//!   (register a part, let parts go, what the parts need, a TTL set, holds found gone, forced
//!   unlocks).
//!
//! - [`watched`]: one watched hold ([`Watched`]), what every guard stands on: registered
//!   with the handle, its doubts, its loss signal, let go once or kept.
//!
//! This file is the face: it re-exports what the crate uses.

mod doubt;
mod handle;
mod loss;
mod run;
mod shape;
mod state;
mod watched;

pub(crate) use doubt::FailoverHolds;
#[allow(unused_imports)] // the entry point for other detectors of a stalled node
pub(crate) use doubt::Node;
pub(crate) use handle::{TtlSet, Upkeep, Watchdog};
pub use loss::HoldState;
pub(crate) use loss::{drift, LossSignal};
pub(crate) use shape::{no_values, renewal_call, Layout, RenewalShape, ShapeKeys};
pub(crate) use state::{HoldKey, HoldKeyHash};
pub(crate) use watched::Watched;
