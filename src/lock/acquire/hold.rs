//! One owner's hold of one lock: the value acquisition, give-up clean-up, guards and releases
//! share, and every Redis call made with it.
//!
//! # An attempt, stage by stage ([`Hold::attempt`])
//! 1. **Turn** ([`Hold::take_turn`]): a background release of this lock goes first; the
//!    attempt takes the owner's ledger entry (one call changing this owner's count at a time)
//!    and learns the count before it (`before`).
//! 2. **Send**: the kind's acquire call runs on the core (on a private connection followed by
//!    `WAIT` where the master has replicas), with an [`InFlightAttempt`] armed.
//! 3. **Conclude** ([`Hold::conclude`]): no replica acknowledged → undone, `NotReplicated`;
//!    sent but no reply → `Ambiguous`, reconciled in the background; else the reply is
//!    decoded, the ledger learns the new count, and an acquisition becomes an [`Acquired`].
//!
//! # Drop guards: what a dropped future leaves behind
//! Each guard is armed for one stretch and does one thing if dropped there; nothing else in
//! the acquisition path cleans up on drop.
//! * [`InFlightAttempt`] (armed from the send until the reply is handled): the script may
//!   have run, so the owner's ledger entry passes to a reconciliation task that undoes the
//!   hold it made, if any (counted as a release in flight, so later acquisitions through
//!   this client wait for it).
//! * [`Acquired`] (armed from a successful reply until a guard takes the hold): the hold is
//!   released in the background (a late acquisition).
//! * [`GiveUp`] (armed while a waiting acquisition runs, until its give-up call has run): a
//!   queued waiter's give-up clean-up (the fair lock's queue exit) runs in the background.
//! * [`TellQueue`] (armed while a release of a queueing kind is in flight): the local queue's
//!   head is told the lock may be free, so it attempts instead of waiting out the lease.
//!
//! The local queue's `Ticket` and the pub/sub `Subscription` leave their queue and channel
//! on drop by themselves.

use std::{sync::Arc, time::Duration};

use tokio::time::Instant;

use crate::lock::kind::{
    decode_acquire, decode_release, Acquire, AcquireReply, AcquireRequest, Mode, Protocol, Release,
    ReleaseRequest, Step,
};
use crate::{
    client::Client,
    conn::{core::AcquireFailure, replicas::Synced},
    error::{Error, Result},
    lock::acquire::ledger::{Entry, Known},
    service::watchdog::{renewal_call, HoldKey},
    types::names,
};

/// One owner bound to one lock with one lease: everything needed to acquire, renew, release or
/// give up. Cheap to clone (reference-counted parts).
#[derive(Clone)]
pub(crate) struct Hold {
    pub(crate) client: Client,
    pub(crate) proto: Arc<dyn Protocol>,
    /// The raw lock name (`proto.name()`), shared with the handle and with the ledger and
    /// watchdog entries of this hold (no copy per entry).
    pub(crate) name: Arc<str>,
    /// The owner's hash field (`<uuid>:<id>`, plus `:write` for a write lock).
    pub(crate) field: Arc<str>,
    /// A group multi-lock's set of values (the kind's `RenewalShape::values`; empty for every
    /// other kind): with the name and field, what names this hold in the client's bookkeeping.
    pub(crate) values: Arc<[String]>,
    /// The TTL set by acquisitions and re-armed by partial releases (the lease, or the
    /// watchdog timeout).
    pub(crate) lease_ms: u64,
    /// How long a waiting acquisition of a queueing kind keeps its place in the kind's queue
    /// between attempts (the fair lock's `threadWaitTime`); 0 where nothing queues.
    pub(crate) queue_ms: u64,
}

impl std::fmt::Debug for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hold")
            .field("lock", &self.name())
            .field("owner", &self.field)
            .field("lease_ms", &self.lease_ms)
            .finish()
    }
}

impl Hold {
    /// The raw lock name.
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// What names this hold in the owner ledger and the watchdog.
    pub(crate) fn key(&self) -> HoldKey {
        HoldKey::new(self.name.clone(), self.field.clone(), self.values.clone())
    }

    /// One acquisition attempt.
    ///
    /// Cancel safety: no task is spawned for an attempt. If the caller's future is dropped
    /// while the script may be in flight, the attempt becomes ambiguous to this client, and it
    /// is treated as one (below): the owner's ledger entry passes to a reconciliation task
    /// that undoes the hold the script made, if it made one. That reconciliation counts as a
    /// release in flight, so later acquisitions of the lock through this client wait for it
    /// (as for a dropped guard).
    ///
    /// Ambiguity: the attempt holds the owner's ledger entry (see `ledger`) from before the
    /// count is known until the outcome is. When the script was sent but no reply came (a
    /// timeout or a lost connection), the attempt fails with [`Error::Ambiguous`] and the entry
    /// passes to a reconciliation task that undoes that one attempt if Redis ran it; the
    /// owner's next attempt or release waits for it.
    ///
    /// `deadline` bounds only the wait for that reconciliation (`None`: as long as it takes,
    /// which is until Redis answers again or the reconciled hold would have expired).
    pub(crate) async fn attempt(
        &self,
        mode: Mode,
        deadline: Option<Instant>,
    ) -> Result<Step<Acquired>> {
        let (entry, before) = self.take_turn(deadline).await?;
        let (call, reply) = self.proto.acquire(AcquireRequest {
            field: &self.field,
            lease_ms: self.lease_ms,
            mode,
        });
        let mut in_flight = InFlightAttempt {
            hold: self,
            entry: Some(entry),
            before,
            sent_at: Instant::now(),
            barrier: crate::conn::replicas::Barrier::default(),
        };
        let acquired = |v: &fred::types::Value| {
            matches!(
                decode_acquire(reply, v.clone(), self.name()),
                Ok(Acquire::Acquired { .. })
            )
        };
        let outcome = self
            .client
            .core()
            .run_acquire(call, self.name(), deadline, acquired, &in_flight.barrier)
            .await;
        self.conclude(&mut in_flight, outcome, reply).await
    }

    /// Stage 1 of an attempt: waits for a background release of this lock (never longer than
    /// one command timeout) and for the owner's ledger entry (for an earlier ambiguous attempt's
    /// reconciliation at most until `deadline`), then learns the owner's count before it.
    async fn take_turn(&self, deadline: Option<Instant>) -> Result<(Entry, u64)> {
        if self.client.is_closed() {
            return Err(Error::Shutdown);
        }
        // A release of this lock handed to the background (a dropped guard) goes first, so
        // the lock it frees is seen free; never longer than one command timeout.
        let bound = crate::config::later(Instant::now(), self.client.config().timeout);
        let bound = deadline.map_or(bound, |d| d.min(bound));
        self.client
            .pending_releases()
            .settle(self.name(), bound)
            .await;
        let enter = self.client.ledgers().enter(self.key(), self.lease_ms);
        let mut entry = match deadline {
            None => enter.await,
            Some(d) => tokio::time::timeout_at(d, enter).await.map_err(|_| {
                Error::Timeout(
                    format!(
                        "an earlier ambiguous acquisition of {} by this owner is still being \
                         reconciled",
                        self.name()
                    )
                    .into(),
                )
            })?,
        };
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
        }
        Ok((entry, before))
    }

    /// Stage 3 of an attempt: what its outcome means. Disarms `in_flight` (taking the owner's
    /// entry back) once the outcome is known and handled.
    async fn conclude(
        &self,
        in_flight: &mut InFlightAttempt<'_>,
        outcome: std::result::Result<(fred::types::Value, Synced), AcquireFailure>,
        reply: AcquireReply,
    ) -> Result<Step<Acquired>> {
        let (before, sent_at) = (in_flight.before, in_flight.sent_at);
        if let Ok((_, Synced::Missing { wanted, acked })) = &outcome {
            // Acquired, but no replica acknowledged: undone while `in_flight` still holds the
            // owner's entry, so a caller dropped during the undo leaves it to a background
            // reconciliation (idempotent) instead of leaving a hold nobody tracks.
            let (wanted, acked) = (*wanted, *acked);
            self.reentered(before, sent_at);
            self.undo_unreplicated(in_flight).await;
            return Err(Error::NotReplicated {
                lock: self.name().to_owned(),
                wanted,
                acked,
            });
        }
        let mut entry = in_flight.entry.take().expect("taken once, here");
        let (value, synced) = match outcome {
            Ok(answer) => answer,
            Err(f) if f.sent && f.error.is_transient() => {
                self.reconcile_in_background(entry, before, sent_at, None, None);
                return Err(f.error.into_ambiguous(self.name()));
            }
            Err(f) => return Err(f.error),
        };
        Ok(match decode_acquire(reply, value, self.name())? {
            Acquire::Acquired { token } => {
                debug_assert!(!matches!(synced, Synced::Missing { .. }));
                entry.set(Known::Count(before + 1));
                self.reentered(before, sent_at);
                Step::Done(Acquired {
                    hold: self.clone(),
                    sent_at,
                    token,
                    armed: true,
                })
            }
            Acquire::Busy { frees_in } => {
                // Busy: another owner holds the lock, so this one holds nothing.
                entry.set(Known::Count(0));
                Step::Busy { frees_in }
            }
        })
    }

    /// Undoes an acquisition no replica acknowledged (the owner's count was `before`): one
    /// owner-checked release, so a re-entry takes back only its own increment. A release that
    /// fails on a transient error is finished by the reconciliation task.
    async fn undo_unreplicated(&self, in_flight: &mut InFlightAttempt<'_>) {
        crate::observe::not_replicated(self.name(), &self.field);
        let outcome = self.release_once().await;
        let (before, sent_at) = (in_flight.before, in_flight.sent_at);
        let Some(mut entry) = in_flight.entry.take() else {
            return;
        };
        match outcome {
            Ok(Release::StillHeld) => entry.set(Known::Count(before)),
            Ok(Release::Released | Release::NotHeld) => entry.set(Known::Count(0)),
            Err(e) if e.is_transient() => {
                log::debug!("undoing an unreplicated acquisition of {} failed ({e}); retrying in the background", self.name());
                self.reconcile_in_background(entry, before, sent_at, None, None);
            }
            Err(e) => {
                log::warn!(
                    "could not undo an unreplicated acquisition of {} ({e}); it expires with \
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
    /// `release`: the release in flight this reconciliation counts as (see `pending`).
    /// `barrier`: the private connection a dropped synced attempt's script went on; closed and
    /// waited for first, so the count is read after that script ran (see `replicas::Barrier`).
    fn reconcile_in_background(
        &self,
        mut entry: Entry,
        before: u64,
        sent_at: Instant,
        release: Option<crate::lock::acquire::pending::InFlight>,
        barrier: Option<fred::clients::Client>,
    ) {
        // The script may have run: a re-entry it made set the TTL.
        self.reentered(before, sent_at);
        let hold = self.clone();
        let expires = crate::config::later(sent_at, Duration::from_millis(hold.lease_ms));
        drop(self.client.spawn(async move {
            let _release = release;
            if let Some(connection) = barrier {
                crate::conn::replicas::close_and_wait(connection, hold.client.config().timeout)
                    .await;
            }
            let retry = hold.client.config().retry_delay;
            let timeout = hold.client.config().timeout;
            let mut looked_again = false;
            loop {
                if hold.client.is_closed() {
                    entry.set(Known::Unknown);
                    return;
                }
                // A stalled command connection is being replaced: read on the new one, not
                // behind the withheld reply.
                let core = hold.client.core();
                core.connection_replaced(timeout).await;
                match hold.reconcile_once(before).await {
                    // Not run, as read on a connection that replaced the one the script went
                    // on: the script may still be on its way to the server. Look once more,
                    // one command timeout later.
                    Ok((_, false)) if !looked_again && core.replaced_since(sent_at) => {
                        looked_again = true;
                        tokio::time::sleep(timeout).await;
                    }
                    Ok((after, _)) => {
                        crate::observe::reconciled(hold.name(), &hold.field, before, after);
                        entry.set(Known::Count(after));
                        return;
                    }
                    Err(e)
                        if e.is_transient()
                            && crate::config::later(Instant::now(), retry) < expires =>
                    {
                        log::debug!(
                            "reconciling an attempt on {} failed ({e}); retrying",
                            hold.name()
                        );
                        tokio::time::sleep(retry).await;
                    }
                    Err(e) => {
                        log::warn!(
                            "could not reconcile an ambiguous acquisition of {} ({e}); \
                             any hold it made expires with its lease",
                            hold.name()
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
                    self.field,
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

    /// This owner's hold count, read as the kind reads it (see `Protocol::hold_count`).
    pub(crate) async fn count(&self) -> Result<u64> {
        let core = self.client.core();
        match self.proto.hold_count(&self.field) {
            None => core.hold_count(self.name(), &self.field).await,
            Some(call) => {
                let v = core.run(call, self.name()).await?;
                v.as_i64()
                    .map(|n| n.max(0) as u64)
                    .ok_or_else(|| crate::conn::core::unexpected(self.name(), format!("{v:?}")))
            }
        }
    }

    /// Releases one hold, retrying transient failures with the same request id (the unlock
    /// receipt makes the retries idempotent), then hands the receipt to the batched clean-up.
    pub(crate) async fn release(&self) -> Result<Release> {
        if self.client.is_closed() {
            return Err(Error::Shutdown);
        }
        // A release whose future is dropped midway may have freed the lock: the local queue's
        // head is told so (it then attempts), rather than waiting out the holder's lease.
        let mut tell_queue = TellQueue {
            hold: self,
            armed: self.proto.local_queue().is_some(),
        };
        let mut entry = self.client.ledgers().enter(self.key(), self.lease_ms).await;
        // A release that may free the lock tells the local queue first (its hand-off policy
        // may want to know, with this very release, whether another client listens).
        let ask = match (self.proto.local_queue(), entry.known()) {
            (_, Known::Count(n)) if n > 1 => None,
            (Some(tag), _) => self.client.local_queues().releasing(tag, self.name()),
            (None, _) => None,
        };
        let (outcome, others) = match ask {
            // Sent together: the question costs no round trip of its own.
            Some(channel) => {
                let (outcome, others) = futures::join!(
                    self.release_once(),
                    self.client.core().others_listen(&channel)
                );
                (outcome, Some(others))
            }
            None => (self.release_once().await, None),
        };
        tell_queue.armed = false;
        entry.set(match (&outcome, entry.known()) {
            (Ok(Release::StillHeld), Known::Count(n)) if n > 0 => Known::Count(n - 1),
            (Ok(Release::Released | Release::NotHeld), _) => Known::Count(0),
            _ => Known::Unknown,
        });
        drop(entry);
        if let Some(tag) = self.proto.local_queue() {
            // The next local waiter tries at once, without waiting for the unlock message.
            let freed = !matches!(outcome, Ok(Release::StillHeld));
            self.client
                .local_queues()
                .released(tag, self.name(), freed, others);
        }
        outcome
    }

    /// Every guard of this owner on this lock learns that a call sent at `sent_at` set the
    /// lock's TTL to this hold's lease (see `Watchdog::ttl_set`).
    fn ttl_set(&self, sent_at: Instant, lease: Duration) {
        self.client
            .watchdog()
            .ttl_set(&self.key(), sent_at, lease, Instant::now());
    }

    /// An attempt sent at `sent_at` re-entered (or may have) a hold of this owner, whose count
    /// was `before`: where the kind's re-entry sets the TTL, the owner's guards learn it.
    fn reentered(&self, before: u64, sent_at: Instant) {
        if before > 0 && self.proto.reentry_sets_ttl() {
            self.ttl_set(sent_at, Duration::from_millis(self.lease_ms));
        }
    }

    /// The release call itself (the caller holds the owner's ledger entry). A partial release
    /// (or one that may have run) re-arms the TTL to this hold's lease: the owner's guards
    /// learn it.
    async fn release_once(&self) -> Result<Release> {
        let sent_at = Instant::now();
        let outcome = self.release_call().await;
        if matches!(outcome, Ok(Release::StillHeld) | Err(_))
            && self.proto.partial_release_sets_ttl()
        {
            self.ttl_set(sent_at, Duration::from_millis(self.lease_ms));
        }
        outcome
    }

    async fn release_call(&self) -> Result<Release> {
        let core = self.client.core();
        let config = core.config();
        let receipt = names::unlock_receipt(self.name(), &names::request_id());
        let mut tries = 0;
        let reply = loop {
            let call = self.proto.release(ReleaseRequest {
                field: &self.field,
                lease_ms: self.lease_ms,
                receipt: &receipt,
                receipt_px_ms: config.receipt_px_ms(),
                publish: core.messaging().publish_command(),
            });
            match core.run(call, self.name()).await {
                Err(e) if e.is_transient() && tries < config.retry_attempts => {
                    tries += 1;
                    log::debug!("unlock of {} failed ({e}); retrying", self.name());
                    tokio::time::sleep(config.retry_delay).await;
                }
                other => break other?,
            }
        };
        self.client.receipts().done(receipt.into());
        decode_release(reply, self.name())
    }

    /// Hands a release to the client's runtime; never blocks, never panics.
    pub(crate) fn release_in_background(&self) {
        if self.client.is_closed() {
            return;
        }
        let hold = self.clone();
        let in_flight = self.client.pending_releases().begin(self.name());
        drop(self.client.spawn(async move {
            if let Err(e) = hold.release().await {
                log::warn!("background unlock of {} failed: {e}", hold.name());
            }
            drop(in_flight);
        }));
    }

    /// Owner-checked renewal: sets the TTL to `lease` where this owner still holds the lock
    /// (the same call the watchdog batches). `Ok(false)`: the hold is gone.
    pub(crate) async fn renew(&self, lease: Duration) -> Result<bool> {
        let lease_ms = crate::config::lease_millis(lease)?;
        let shape = self.proto.renewal();
        let call = renewal_call(&[(&shape, vec![&*self.field])], lease_ms);
        let sent_at = Instant::now();
        // The owner's ledger entry must outlive the TTL this call may set (even without reply).
        let until = crate::config::later(sent_at, lease);
        self.client.ledgers().extend(&self.key(), until);
        let flags = self.client.core().run_flags(call, self.name()).await?;
        let renewed = flags.first() == Some(&1);
        if renewed {
            self.ttl_set(sent_at, lease);
        }
        Ok(renewed)
    }

    /// A queued waiter's clean-up after it gave up (the fair lock leaves its queue).
    pub(crate) async fn give_up(&self) -> Result<()> {
        if let Some(call) = self.proto.give_up(&self.field, self.queue_ms) {
            self.client.core().run(call, self.name()).await?;
        }
        Ok(())
    }

    /// Hands the give-up clean-up to the client's runtime (a dropped waiter).
    pub(crate) fn give_up_in_background(&self) {
        if self.client.is_closed() || self.proto.give_up(&self.field, self.queue_ms).is_none() {
            return;
        }
        let hold = self.clone();
        drop(self.client.spawn(async move {
            // After the reconciliation of an attempt dropped with it (registered as a release
            // in flight): on a synced attempt's private connection its script could otherwise
            // run after this clean-up and queue the waiter again.
            let timeout = hold.client.config().timeout;
            let bound = crate::config::later(Instant::now(), timeout.saturating_mul(2));
            hold.client
                .pending_releases()
                .settle(hold.name(), bound)
                .await;
            hold.give_up_retrying().await;
        }));
    }

    /// The give-up clean-up, tried again after a transient failure (a timeout, a connection
    /// replaced as stalled or lost: the call may not have run, e.g. under `CLIENT PAUSE WRITE`)
    /// until it succeeds, the client closes, or the entry would have expired by itself (the
    /// queue wait plus one command timeout). The call is idempotent.
    async fn give_up_retrying(&self) {
        let config = self.client.config();
        let wait = Duration::from_millis(self.queue_ms).saturating_add(config.timeout);
        let bound = crate::config::later(Instant::now(), wait);
        let pause = config
            .retry_delay
            .clamp(Duration::from_millis(10), Duration::from_millis(100));
        loop {
            match self.give_up().await {
                Ok(()) => return,
                Err(e) if e.is_transient() && !self.client.is_closed() => {
                    if Instant::now() + pause >= bound {
                        log::warn!("give-up clean-up of {} failed: {e}", self.name());
                        return;
                    }
                    log::debug!("give-up clean-up of {} failed ({e}); retrying", self.name());
                    tokio::time::sleep(pause).await;
                }
                Err(e) => {
                    log::warn!("give-up clean-up of {} failed: {e}", self.name());
                    return;
                }
            }
        }
    }
}

/// A waiting acquisition's give-up clean-up (the fair lock's queue exit): run when the wait
/// ends without the lock ([`settle`](Self::settle)), or in the background if the waiting
/// future is dropped first, including while that call runs.
pub(crate) struct GiveUp<'a> {
    hold: &'a Hold,
    armed: bool,
}

impl<'a> GiveUp<'a> {
    pub(crate) fn arm(hold: &'a Hold) -> Self {
        GiveUp { hold, armed: true }
    }

    /// The wait ended; after one that did not acquire, the give-up call runs now (a transient
    /// failure hands it to the background, so the caller returns at its own deadline and the
    /// entry still leaves the queue).
    pub(crate) async fn settle(mut self, acquired: bool) {
        if !acquired {
            match self.hold.give_up().await {
                Ok(()) => {}
                Err(e) if e.is_transient() => self.hold.give_up_in_background(),
                Err(e) => log::warn!("give-up clean-up of {} failed: {e}", self.hold.name()),
            }
        }
        self.armed = false;
    }
}

impl Drop for GiveUp<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.hold.give_up_in_background();
        }
    }
}

/// Tells the local queue a release may have freed the lock if the release is dropped midway.
struct TellQueue<'a> {
    hold: &'a Hold,
    armed: bool,
}

impl Drop for TellQueue<'_> {
    fn drop(&mut self) {
        if let (true, Some(tag)) = (self.armed, self.hold.proto.local_queue()) {
            self.hold
                .client
                .local_queues()
                .released(tag, self.hold.name(), true, None);
        }
    }
}

/// An attempt whose script may be in flight: if the attempt's future is dropped before the
/// reply, the attempt is ambiguous and its hold (if the script made one) is undone in the
/// background.
struct InFlightAttempt<'a> {
    hold: &'a Hold,
    entry: Option<Entry>,
    before: u64,
    sent_at: Instant,
    /// A synced attempt's private connection while its script may be in flight.
    barrier: crate::conn::replicas::Barrier,
}

impl Drop for InFlightAttempt<'_> {
    fn drop(&mut self) {
        let Some(entry) = self.entry.take() else {
            return;
        };
        if self.hold.client.is_closed() {
            return;
        }
        let release = self.hold.client.pending_releases().begin(self.hold.name());
        self.hold.reconcile_in_background(
            entry,
            self.before,
            self.sent_at,
            Some(release),
            self.barrier.lock().take(),
        );
    }
}

/// A successful acquisition not yet turned into a guard. Dropping it releases the hold.
pub(crate) struct Acquired {
    pub(crate) hold: Hold,
    pub(crate) sent_at: Instant,
    pub(crate) token: Option<u64>,
    armed: bool,
}

impl Acquired {
    /// Takes responsibility for the hold (the guard releases it from now on).
    pub(crate) fn disarm(mut self) -> (Hold, Instant, Option<u64>) {
        self.armed = false;
        (self.hold.clone(), self.sent_at, self.token)
    }
}

impl Drop for Acquired {
    fn drop(&mut self) {
        if self.armed {
            crate::observe::late_acquisition(self.hold.name(), &self.hold.field);
            self.hold.release_in_background();
        }
    }
}
