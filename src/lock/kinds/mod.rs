//! One file per lock kind: its protocol (a [`Protocol`](crate::lock::protocol::Protocol)
//! implementation), its marker type and aliases, its kind-specific methods and its
//! `Client::get_*` factory. `fenced.rs` is the model file for a new kind.

pub(crate) mod backoff;
pub(crate) mod fair;
pub(crate) mod fenced;
pub(crate) mod group;
pub(crate) mod non_reentrant;
pub(crate) mod non_reentrant_fair;
pub(crate) mod reentrant;
pub(crate) mod rwlock;
pub(crate) mod spin;
