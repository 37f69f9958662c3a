//! What services build on locks, done once on the crate's own API: leader election
//! ([`election`]), run-once jobs ([`run_once`]) and the hold view their code gets ([`watch`]).
//!
//! Rooms, lowest first: [`watch`] (the [`HoldWatch`] and `assert_locked`), then [`election`]
//! and [`run_once`] beside each other (neither uses the other).

pub(crate) mod election;
pub(crate) mod run_once;
pub(crate) mod watch;
