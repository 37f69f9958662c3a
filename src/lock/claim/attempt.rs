//! A claim's attempts: the engine's [`Waiter`] for every lock kind (the `impl Waiter for
//! Claim`), and what an attempt's outcome means for the owner's count (the ledger), the
//! ambiguity of a lost reply and the undo of an acquisition no replica acknowledged.
//!
//! # An attempt, stage by stage ([`Waiter::attempt`])
//! 1. **Turn** ([`Claim::take_turn`]): a background release of this lock goes first; the
//!    attempt takes the owner's ledger entry (one call changing this owner's count at a time)
//!    and learns the count before it (`before`). Dropped here, nothing was sent.
//! 2. **Send** ([`Claim::send_and_conclude`]): the kind's acquire call runs on the core (on a
//!    private connection followed by `WAIT` where the master has replicas), and from here to
//!    the end of stage 3 nothing cuts it short ([`detach`]: a caller dropped meanwhile hands
//!    the rest to a task of its own and counts as a release in flight, so later acquisitions
//!    of the lock through this client wait for it, until that task ends).
//! 3. **Conclude** ([`Claim::conclude`]): no replica acknowledged → undone, `NotReplicated`;
//!    sent but no reply → `Ambiguous`, reconciled in the background (carrying the release in
//!    flight of a caller that went away); else the reply is decoded, the ledger learns the new
//!    count, and an acquisition becomes a [`Won`] [`Acquired`].
//!
//! # What a dropped future leaves behind
//! Nothing: each stretch has one owner of its clean-up.
//! * A [`Won`] [`Acquired`] (from a successful reply until a guard takes the hold), dropped on
//!   the task that finished the attempt or by the caller, releases the hold in the background (a late
//!   acquisition).
//! * The engine's `GiveUp` (while a waiting acquisition runs, until its give-up call has run):
//!   a queued waiter's give-up clean-up (the fair lock's queue exit) runs in the background.
//!
//! The wait line's `Ticket` and the pub/sub `Subscription` leave their line and channel on
//! drop by themselves.

use std::{sync::Arc, time::Duration};

use tokio::time::Instant;

use super::calls::Claim;
use crate::engine::{detach, Abandoned, Orphan, SleepOn, Step, Turn, Wait, Waiter, Won};
use crate::lock::protocol::{
    decode_acquire, Acquire, AcquireReply, AcquireRequest, Attempt, Release, SleepRule,
};
use crate::{
    acquisitions::{
        ledger::{Entry, Known},
        pending::InFlight,
    },
    client::Client,
    conn::{core::AcquireFailure, replicas::Synced},
    error::{Error, Result},
    service::{
        pubsub::Reading,
        watchdog::{Upkeep, Watched},
    },
    types::line::WaitLine,
};

impl Claim {
    /// Stage 1 of an attempt: waits for a background release of this lock by another owner
    /// (never longer than one command timeout), for every release of this owner handed to the
    /// background before it and for the owner's ledger entry (an earlier ambiguous attempt's
    /// reconciliation), these at most until `deadline`, then learns the owner's count before
    /// it. The client's `turn` is given back while it waits.
    async fn take_turn(
        &self,
        deadline: Option<Instant>,
        turn: &mut Turn<'_>,
    ) -> Result<(Entry, u64)> {
        if self.client.is_closed() {
            return Err(Error::Shutdown);
        }
        // A release of this lock handed to the background (a dropped guard) goes first, so
        // the lock it frees is seen free; never longer than one command timeout.
        let bound = crate::types::millis::later(Instant::now(), self.client.config().timeout);
        let bound = deadline.map_or(bound, |d| d.min(bound));
        let settle = self.client.pending_releases().settle(self.name(), bound);
        turn.away(settle).await?;
        // The owner's own releases go first whatever they wait for: the ledger orders them.
        let enter = self
            .client
            .ledgers()
            .enter_to_acquire(self.key(), self.lease_ms, deadline);
        let mut entry = turn.away(enter).await?.ok_or_else(|| {
            Error::Timeout(
                format!(
                    "an earlier release or ambiguous acquisition of {} by this owner is still \
                     under way",
                    self.name()
                )
                .into(),
            )
        })?;
        let known = entry.known();
        let before = match known {
            Known::Count(0) => 0,
            // A re-entry (or a count this client is unsure of): read it, so an ambiguous
            // attempt is judged against the real count, not a hold that expired unseen.
            _ => {
                let n = self.count().await?;
                entry.set(Known::Count(n));
                n
            }
        };
        // Lower than what this client knew (or nothing at all): the owner's earlier holds of
        // this lock are gone (deleted, expired, lost in a restart or a failover), whatever
        // their guards were told so far. They are lost, and release nothing, before this
        // acquisition makes a hold of its own: merged into them, it would keep them `Held`
        // and their unlocks would release it.
        let gone = match known {
            Known::Count(k) => before < k || before == 0,
            Known::Unknown => before == 0,
        };
        if gone {
            self.client.watchdog().holds_gone(&self.key());
            entry.new_generation();
        }
        Ok((entry, before))
    }

    /// Stages 2 and 3 of an attempt, never cut short (see [`detach`]): the send, then what
    /// its outcome means. `abandoned`: the release in flight of a caller that went away, for a
    /// reconciliation that outlives the task finishing the attempt to carry.
    async fn send_and_conclude(
        self,
        call: crate::conn::scripts::ScriptCall,
        reply: AcquireReply,
        (entry, before): (Entry, u64),
        deadline: Option<Instant>,
        abandoned: Abandoned<InFlight>,
    ) -> Result<Step<Won<Acquired>>> {
        let sent_at = Instant::now();
        let lock = self.key.name.clone();
        let acquired = move |v: &fred::types::Value| {
            matches!(
                decode_acquire(reply, v.clone(), &lock),
                Ok(Acquire::Acquired { .. })
            )
        };
        // Awaited to the end on this task: nothing is dropped midway (see `replicas::Barrier`).
        let barrier = crate::conn::replicas::Barrier::default();
        let outcome = self
            .client
            .core()
            .run_acquire(call, self.name(), deadline, acquired, &barrier)
            .await;
        self.conclude(outcome, reply, entry, before, sent_at, &abandoned)
            .await
    }

    /// Stage 3 of an attempt: what its outcome means, with the owner's ledger entry (the count
    /// was `before`) held until it is known and handled.
    async fn conclude(
        &self,
        outcome: std::result::Result<(fred::types::Value, Synced), AcquireFailure>,
        reply: AcquireReply,
        mut entry: Entry,
        before: u64,
        sent_at: Instant,
        abandoned: &Abandoned<InFlight>,
    ) -> Result<Step<Won<Acquired>>> {
        if let Ok((_, Synced::Missing { wanted, acked })) = &outcome {
            // Acquired, but no replica acknowledged: undone while the entry is held.
            let (wanted, acked) = (*wanted, *acked);
            self.undo_unreplicated(entry, before, sent_at, abandoned)
                .await;
            return Err(Error::NotReplicated {
                lock: self.name().to_owned(),
                wanted,
                acked,
            });
        }
        let (value, synced) = match outcome {
            Ok(answer) => answer,
            Err(f) if f.sent && f.error.is_transient() => {
                self.reconcile_in_background(entry, before, sent_at, abandoned.take());
                return Err(f.error.into_ambiguous(self.name()));
            }
            Err(f) => return Err(f.error),
        };
        Ok(match decode_acquire(reply, value, self.name())? {
            Acquire::Acquired { token } => {
                debug_assert!(!matches!(synced, Synced::Missing { .. }));
                entry.set(Known::Count(before + 1));
                // Registered before the entry is let go: the owner's next release computes
                // the TTL its parts need with this one among them.
                let watched = self.watch(sent_at);
                Step::Done(Won::new(Acquired {
                    claim: self.clone(),
                    sent_at,
                    token,
                    generation: entry.generation(),
                    watched,
                }))
            }
            Acquire::Busy { frees_in } => {
                // Busy: another owner holds the lock, so this one holds nothing.
                entry.set(Known::Count(0));
                Step::Busy { frees_in }
            }
        })
    }

    /// Registers a hold this claim acquired by a call sent at `sent_at` with the watchdog: a
    /// part without a lease (renewed while it lasts), a leased part, or both when a watchdog
    /// acquisition set a TTL longer than the watchdog timeout (a run-once job's `at_least`:
    /// the key's TTL is a promise too).
    fn watch(&self, sent_at: Instant) -> Watched {
        let ttl = Duration::from_millis(self.lease_ms);
        let timeout = self.client.config().lock_watchdog_timeout;
        let lease = (!self.renewed || ttl > timeout).then_some(ttl);
        let upkeep = Upkeep {
            shape: self.proto.renewal(),
            queue: self.proto.wait_line(),
            presence: self.proto.hold_count(&self.key.field),
        };
        Watched::start(
            self.client.watchdog(),
            self.key(),
            upkeep,
            sent_at,
            self.renewed,
            lease,
        )
    }

    /// Undoes an acquisition no replica acknowledged (the owner's count was `before`): one
    /// owner-checked release, so a re-entry takes back only its own increment. A release that
    /// fails on a transient error is finished by the reconciliation task.
    async fn undo_unreplicated(
        &self,
        mut entry: Entry,
        before: u64,
        sent_at: Instant,
        abandoned: &Abandoned<InFlight>,
    ) {
        crate::observe::not_replicated(self.name(), &self.key.field);
        match self.release_once().await {
            Ok(Release::StillHeld) => entry.set(Known::Count(before)),
            Ok(Release::Released | Release::NotHeld) => entry.set(Known::Count(0)),
            Err(e) if e.is_transient() => {
                log::debug!("undoing an unreplicated acquisition of {} failed ({e:#}); retrying in the background", self.name());
                self.reconcile_in_background(entry, before, sent_at, abandoned.take());
            }
            Err(e) => {
                log::warn!(
                    "could not undo an unreplicated acquisition of {} ({e:#}); it expires with \
                     its lease",
                    self.name()
                );
                entry.set(Known::Unknown);
            }
        }
    }

    /// Undoes an ambiguous attempt made when the owner's count was `before`: reads the count
    /// and, if it is exactly one above, releases one hold (owner-checked, with the kind's own
    /// release, so a freed lock is announced). Retried on transient errors until it succeeds
    /// or the hold the attempt may have made would have expired (`sent_at` + lease). Each
    /// round is idempotent: a release whose reply was lost shows as the count being back at
    /// `before` in the next round.
    /// `release`: the release in flight this reconciliation counts as (see `pending`): that
    /// of a caller that went away while the attempt ran.
    fn reconcile_in_background(
        &self,
        mut entry: Entry,
        before: u64,
        sent_at: Instant,
        release: Option<InFlight>,
    ) {
        let claim = self.clone();
        let expires = crate::types::millis::later(sent_at, Duration::from_millis(claim.lease_ms));
        drop(self.client.spawn(async move {
            let _release = release;
            let retry = claim.client.config().retry_delay;
            let timeout = claim.client.config().timeout;
            let mut looked_again = false;
            loop {
                if claim.client.is_closed() {
                    entry.set(Known::Unknown);
                    return;
                }
                // A stalled command connection is being replaced: read on the new one, not
                // behind the withheld reply.
                let core = claim.client.core();
                core.connection_replaced(timeout).await;
                match claim.reconcile_once(before).await {
                    // Not run, as read on a connection that replaced the one the script went
                    // on: the script may still be on its way to the server. Look once more,
                    // one command timeout later.
                    Ok((_, false)) if !looked_again && core.replaced_since(sent_at) => {
                        looked_again = true;
                        tokio::time::sleep(timeout).await;
                    }
                    Ok((after, _)) => {
                        crate::observe::reconciled(claim.name(), &claim.key.field, before, after);
                        entry.set(Known::Count(after));
                        return;
                    }
                    Err(e)
                        if e.is_transient()
                            && crate::types::millis::later(Instant::now(), retry) < expires =>
                    {
                        log::debug!(
                            "reconciling an attempt on {} failed ({e:#}); retrying",
                            claim.name()
                        );
                        tokio::time::sleep(retry).await;
                    }
                    Err(e) => {
                        log::warn!(
                            "could not reconcile an ambiguous acquisition of {} ({e:#}); \
                             any hold it made expires with its lease",
                            claim.name()
                        );
                        entry.set(Known::Unknown);
                        return;
                    }
                }
            }
        }));
    }

    /// One reconciliation round; the owner's count afterwards, and whether the attempt had run
    /// (and was undone).
    async fn reconcile_once(&self, before: u64) -> Result<(u64, bool)> {
        let now = self.count().await?;
        if now != before + 1 {
            // `before`: the attempt did not run; lower: it expired or was force-unlocked.
            // Higher cannot happen while the entry is held; leave it and say so.
            if now > before + 1 {
                log::warn!(
                    "owner {} of {} holds {now}, expected at most {}",
                    self.key.field,
                    self.name(),
                    before + 1
                );
            }
            return Ok((now, false));
        }
        let after = match self.release_once().await? {
            Release::StillHeld => before,
            Release::Released | Release::NotHeld => 0,
        };
        Ok((after, true))
    }

    /// Another acquisition of this owner, of this client, still waits on the owner's own channel
    /// (the fair lock's): the queue's place is theirs too (see `Reading::OwnLock`).
    fn owner_waits_on(&self) -> bool {
        match self.proto.sleep() {
            SleepRule::OwnChannel { prefix } => {
                let channel = SleepRule::own_channel(&prefix, &self.key.field);
                self.client.pubsub().waiters_of(&channel) > 0
            }
            _ => false,
        }
    }

    /// The give-up clean-up, tried again after a transient failure (a timeout, a connection
    /// replaced as stalled or lost: the call may not have run, e.g. under `CLIENT PAUSE WRITE`)
    /// until it succeeds, the client closes, or the entry would have expired by itself (the
    /// queue wait plus one command timeout). The call is idempotent.
    async fn give_up_retrying(&self) {
        let config = self.client.config();
        let wait = Duration::from_millis(self.queue_ms).saturating_add(config.timeout);
        let bound = crate::types::millis::later(Instant::now(), wait);
        let pause = config
            .retry_delay
            .clamp(Duration::from_millis(10), Duration::from_millis(100));
        loop {
            match self.give_up().await {
                Ok(()) => return,
                Err(e) if e.is_transient() && !self.client.is_stopped() => {
                    if Instant::now() + pause >= bound {
                        log::warn!("give-up clean-up of {} failed: {e:#}", self.name());
                        return;
                    }
                    log::debug!(
                        "give-up clean-up of {} failed ({e:#}); retrying",
                        self.name()
                    );
                    tokio::time::sleep(pause).await;
                }
                Err(e) => {
                    log::warn!("give-up clean-up of {} failed: {e:#}", self.name());
                    return;
                }
            }
        }
    }
}

/// A successful acquisition on its way to a guard (inside a [`Won`] until a guard takes it),
/// already registered with the watchdog.
pub(crate) struct Acquired {
    pub(crate) claim: Claim,
    pub(crate) sent_at: Instant,
    pub(crate) token: Option<u64>,
    /// The owner's hold it is part of (see `acquisitions::ledger`).
    pub(crate) generation: u64,
    pub(crate) watched: Watched,
}

/// A late acquisition (its caller went away): the hold is released in the background.
impl Orphan for Acquired {
    fn orphaned(mut self) {
        crate::observe::late_acquisition(self.claim.name(), &self.claim.key.field);
        self.watched.let_go(self.claim.client.watchdog());
        self.claim.release_in_background(Some(self.generation));
    }
}

/// The engine's waiter for every lock kind.
impl Waiter for Claim {
    type Won = Acquired;
    /// A lock's single try reports an acquisition no replica acknowledged to its caller.
    const RETRIES_UNREPLICATED_ONCE: bool = false;

    fn client(&self) -> &Client {
        &self.client
    }

    fn name(&self) -> &str {
        &self.key.name
    }

    fn shared_name(&self) -> Arc<str> {
        self.key.name.clone()
    }

    /// One acquisition attempt (stages in the module docs).
    ///
    /// Ambiguity: the attempt holds the owner's ledger entry (see `ledger`) from before the
    /// count is known until the outcome is. When the script was sent but no reply came (a
    /// timeout or a lost connection), the attempt fails with [`Error::Ambiguous`] and the entry
    /// passes to a reconciliation task that undoes that one attempt if Redis ran it; the
    /// owner's next attempt or release waits for it.
    ///
    /// A single try waits at most one command timeout for an earlier ambiguous attempt's
    /// reconciliation; a waiter's attempt until its deadline (`None`: as long as it takes,
    /// which is until Redis answers again or the reconciled hold would have expired).
    async fn attempt(&self, wait: Wait, turn: &mut Turn<'_>) -> Result<Step<Won<Acquired>>> {
        let (attempt, deadline) = match wait {
            Wait::Once => {
                let bound =
                    crate::types::millis::later(Instant::now(), self.client.config().timeout);
                (Attempt::Once, Some(bound))
            }
            Wait::Until(deadline) => (
                Attempt::Queued {
                    queue_ms: self.queue_ms,
                },
                deadline,
            ),
        };
        let turn = self.take_turn(deadline, turn).await?;
        let (call, reply) = self.proto.acquire_call(AcquireRequest {
            field: &self.key.field,
            lease_ms: self.lease_ms,
            attempt,
        });
        let (pending, name) = (
            self.client.pending_releases().clone(),
            self.key.name.clone(),
        );
        let claim = self.clone();
        detach(
            self.client.runtime(),
            move || pending.begin(&name),
            move |abandoned| claim.send_and_conclude(call, reply, turn, deadline, abandoned),
        )
        .await
    }

    /// An attempt whose outcome is unknown is reconciled: the wait may go on.
    fn repeatable(&self) -> bool {
        true
    }

    fn sleep_on(&self) -> SleepOn {
        let (channel, reading) = match self.proto.sleep() {
            SleepRule::BackOff(backoff) => return SleepOn::BackOff(backoff),
            SleepRule::Channel(channel) => (channel, Reading::Lock),
            SleepRule::OwnChannel { prefix } => (
                SleepRule::own_channel(&prefix, &self.key.field),
                Reading::OwnLock,
            ),
        };
        SleepOn::Channel { channel, reading }
    }

    fn wait_line(&self) -> Option<WaitLine> {
        self.proto.wait_line()
    }

    /// Not while local waiters are in line, unless the owner may hold the lock already (a
    /// re-entry never waits behind its own hold).
    fn attempts_first(&self) -> bool {
        self.proto.wait_line().is_none_or(|line| {
            self.client
                .wait_lines()
                .attempts_first(line, self.name(), || {
                    self.client.ledgers().may_hold(&self.key())
                })
        })
    }

    /// The hold lasts at least its lease from the attempt's send.
    fn lasts_until(&self, won: &Acquired) -> Instant {
        crate::types::millis::later(won.sent_at, Duration::from_millis(self.lease_ms))
    }

    /// A queued waiter's clean-up after it gave up (the fair lock leaves its queue), unless
    /// another acquisition of the same owner of this client still waits in its place.
    async fn give_up(&self) -> Result<()> {
        if self.owner_waits_on() {
            return Ok(());
        }
        if let Some(call) = self.proto.give_up(&self.key.field, self.queue_ms) {
            self.client.core().run(call, self.name()).await?;
        }
        Ok(())
    }

    fn give_up_in_background(&self) {
        if self.client.is_stopped() || self.proto.give_up(&self.key.field, self.queue_ms).is_none()
        {
            return;
        }
        let claim = self.clone();
        drop(self.client.spawn(async move {
            // After an attempt dropped with it (registered as a release in flight until it
            // ends, and its reconciliation if any): on a synced attempt's private connection
            // its script could otherwise run after this clean-up and queue the waiter again.
            let timeout = claim.client.config().timeout;
            let bound = crate::types::millis::later(Instant::now(), timeout.saturating_mul(2));
            claim
                .client
                .pending_releases()
                .settle(claim.name(), bound)
                .await;
            claim.give_up_retrying().await;
        }));
    }
}
