//! One owner's claim to one lock ([`Claim`]): the value acquisition, give-up clean-up, guards
//! and releases share. A claim exists before anything is held (the attempts are made for it),
//! while the lock is held (a guard keeps it, to renew and release), and after (a background
//! release); a *hold* is what a successful attempt made. Here: the claim and every call made
//! for a hold it has (count, release with its unlock receipt and retries, background release,
//! renewal). Its attempts, as the engine's [`Waiter`](super::waiter::Waiter) for every lock
//! kind, are in `attempt`.
//!
//! A release of a queueing kind dropped midway tells the local wait line's head the lock may
//! be free ([`TellQueue`]), so it attempts instead of waiting out the lease.

use std::{sync::Arc, time::Duration};

use tokio::time::Instant;

use crate::lock::protocol::{decode_release, Protocol, Release, ReleaseRequest};
use crate::{
    acquisitions::ledger::Known,
    client::Client,
    error::{Error, Result},
    service::watchdog::{renewal_call, HoldKey, TtlSet},
    types::names,
};

/// One owner's claim to one lock with one lease: everything needed to acquire, renew, release
/// or give up, whether anything is held yet or not (it was `Hold`, a name that said more than
/// it knew). Cheap to clone (reference-counted parts).
#[derive(Clone)]
pub(crate) struct Claim {
    pub(crate) client: Client,
    pub(crate) proto: Arc<dyn Protocol>,
    /// What names this hold in the client's bookkeeping: the raw lock name (`proto.name()`),
    /// the owner field and a group multi-lock's set of values (the kind's
    /// `RenewalShape::values`; empty for every other kind), made (and hashed) once by the
    /// handle and shared with the ledger and watchdog entries of this hold.
    pub(crate) key: HoldKey,
    /// The TTL set by acquisitions and re-armed by partial releases (the lease, or the
    /// watchdog timeout).
    pub(crate) lease_ms: u64,
    /// The hold is renewed by the watchdog (taken without a lease): a hold this claim makes
    /// has a part without a lease, and the part a release by it lets go is that one.
    pub(crate) renewed: bool,
    /// How long a waiting acquisition of a queueing kind keeps its place in the kind's queue
    /// between attempts (the fair lock's `threadWaitTime`); 0 where nothing queues.
    pub(crate) queue_ms: u64,
}

impl std::fmt::Debug for Claim {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Claim")
            .field("lock", &self.name())
            .field("owner", &self.key.field)
            .field("lease_ms", &self.lease_ms)
            .finish()
    }
}

impl Claim {
    /// The raw lock name.
    pub(crate) fn name(&self) -> &str {
        &self.key.name
    }

    /// What names this hold in the owner ledger and the watchdog.
    pub(crate) fn key(&self) -> HoldKey {
        self.key.clone()
    }

    /// This owner's hold count, read as the kind reads it (see `Protocol::hold_count`).
    pub(crate) async fn count(&self) -> Result<u64> {
        let core = self.client.core();
        match self.proto.hold_count(&self.key.field) {
            None => core.hold_count(self.name(), &self.key.field).await,
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
    /// `generation`: the owner's hold the releasing guard was made in (see
    /// `acquisitions::ledger`); once the owner's hold is a later one, nothing is sent and the
    /// answer is [`Release::NotHeld`]. `None` (the Java-style unlock through a handle):
    /// whatever the owner holds.
    pub(crate) async fn release(&self, generation: Option<u64>) -> Result<Release> {
        if self.client.is_stopped() {
            return Err(Error::Shutdown);
        }
        // The entry must outlive the TTL the release may re-arm (what the parts left need).
        let lasts = match self.rearm() {
            Rearm::To(lease, _) => crate::types::millis::clamp_millis(lease).max(self.lease_ms),
            Rearm::Ended => self.lease_ms,
        };
        let mut entry = self.client.ledgers().enter(self.key(), lasts).await;
        if generation.is_some_and(|g| g != entry.generation()) {
            drop(entry);
            self.released_nothing();
            return Ok(Release::NotHeld);
        }
        // A release whose future is dropped midway may have freed the lock: the local queue's
        // head is told so (it then attempts), rather than waiting out the holder's lease.
        let mut tell_queue = TellQueue {
            claim: self,
            armed: self.proto.wait_line().is_some(),
        };
        // A release that may free the lock tells the local queue first (its hand-off policy
        // may want to know, with this very release, whether another client listens).
        let ask = match (self.proto.wait_line(), entry.known()) {
            (_, Known::Count(n)) if n > 1 => None,
            (Some(tag), _) => self.client.wait_lines().releasing(tag, self.name()),
            (None, _) => None,
        };
        // Whether the head was told before the release's reply (see `hands_over_early`).
        let mut told = false;
        let (outcome, others) = match ask {
            // Sent together: the question costs no round trip of its own. (Boxed: its future
            // is several KiB, and every release, most of which never ask, would carry it.)
            Some(channel) => {
                let (outcome, others) = futures::join!(
                    self.release_once(),
                    Box::pin(self.client.core().others_listening(&channel))
                );
                (outcome, Some(others))
            }
            None if self.hands_over_early(entry.known()) => {
                let mut release = std::pin::pin!(self.release_once());
                match futures::poll!(release.as_mut()) {
                    std::task::Poll::Ready(outcome) => (outcome, None),
                    // Written to the connection: the head may attempt behind it now.
                    std::task::Poll::Pending => {
                        let tag = self.proto.wait_line();
                        if tag.is_some_and(|tag| {
                            self.client.wait_lines().hand_over_early(tag, self.name())
                        }) {
                            tell_queue.armed = false;
                            told = true;
                        }
                        (release.await, None)
                    }
                }
            }
            None => (self.release_once().await, None),
        };
        tell_queue.armed = false;
        entry.set(match (&outcome, entry.known()) {
            (Ok(Release::StillHeld), Known::Count(n)) if n > 0 => Known::Count(n - 1),
            (Ok(Release::Released | Release::NotHeld), _) => Known::Count(0),
            _ => Known::Unknown,
        });
        if matches!(outcome, Ok(Release::Released | Release::NotHeld)) {
            // Nothing of the owner is left in Redis: the guards whose parts are still
            // registered (a handle's unlock took another part than theirs) hold nothing.
            self.client.watchdog().holds_released(&self.key());
        }
        drop(entry);
        if let (Some(tag), false) = (self.proto.wait_line(), told) {
            // The next local waiter tries at once, without waiting for the unlock message.
            let freed = !matches!(outcome, Ok(Release::StillHeld));
            self.client
                .wait_lines()
                .released(tag, self.name(), freed, others);
        }
        outcome
    }

    /// A guard's hold ended without a release (it is gone, or a later hold of the owner
    /// replaced it): the local wait line, which counted it as a local holder, learns the lock
    /// may be free (its head tries; a line nobody waits in ends).
    pub(crate) fn released_nothing(&self) {
        if let Some(tag) = self.proto.wait_line() {
            self.client
                .wait_lines()
                .released(tag, self.name(), true, None);
        }
    }

    /// Whether this release may tell the local wait line's head before its reply is back
    /// (see `WaitLines::hand_over_early`): it frees the lock (this owner's count is known to
    /// be one), and the head's attempt would go on the connection this release goes on, after
    /// it (`Core::acquisitions_follow`: no failover holding commands, no replica-synced
    /// acquisition on a connection of its own).
    fn hands_over_early(&self, known: Known) -> bool {
        known == Known::Count(1)
            && self.proto.wait_line().is_some()
            && self.client.core().acquisitions_follow()
    }

    /// Every guard of this owner on this lock learns that a call sent at `sent_at` set the
    /// lock's TTL to `lease` (see `Watchdog::ttl_set`).
    fn ttl_set(&self, sent_at: Instant, lease: Duration, set: TtlSet) {
        self.client
            .watchdog()
            .ttl_set(&self.key(), sent_at, lease, Instant::now(), set);
    }

    /// The TTL a partial release re-arms, from the parts of this owner's hold that remain (its
    /// own part already let go):
    /// * none known (nothing of the hold is registered: an acquisition undone, a release by a
    ///   handle whose guards are gone): this claim's lease;
    /// * all of one lease mode with the part released: the lease, as Redisson re-arms it (the
    ///   watchdog timeout; the longest lease of the parts left, each as if taken now, or
    ///   longer where a part left ends later);
    /// * modes mixed: the longest part (the watchdog timeout while a part without a lease
    ///   remains, else the latest lease's end);
    /// * every part left has ended: none; the release frees the whole hold ([`Rearm::Ended`]).
    fn rearm(&self) -> Rearm {
        let own = Duration::from_millis(self.lease_ms);
        if !self.proto.partial_release_sets_ttl() {
            return Rearm::To(own, TtlSet::Exactly { part: None });
        }
        let need = self.client.watchdog().need(&self.key());
        let timeout = self.client.config().lock_watchdog_timeout;
        match need.ttl(timeout, Instant::now()) {
            None => Rearm::To(own, TtlSet::Exactly { part: None }),
            Some(left) if left.is_zero() => Rearm::Ended,
            Some(left) if !self.renewed && !need.renewed => {
                let lease = need.longest_lease.unwrap_or(own);
                Rearm::To(left.max(lease), TtlSet::Rearmed)
            }
            Some(left) => Rearm::To(left, TtlSet::Exactly { part: None }),
        }
    }

    /// The release call itself (the caller holds the owner's ledger entry). A partial release
    /// (or one that may have run) re-arms the TTL as [`rearm`](Self::rearm) says: the owner's
    /// guards learn it.
    pub(super) async fn release_once(&self) -> Result<Release> {
        let (lease, set) = match self.rearm() {
            Rearm::To(lease, set) => (lease, set),
            Rearm::Ended => return self.release_ended().await,
        };
        let sent_at = Instant::now();
        let outcome = self.release_call(lease).await;
        if self.proto.partial_release_sets_ttl() {
            match outcome {
                Ok(Release::StillHeld) => self.ttl_set(sent_at, lease, set),
                Err(_) => self.ttl_set(sent_at, lease, TtlSet::AtMost),
                _ => {}
            }
        }
        outcome
    }

    /// A partial release whose other parts have all ended: the owner's holds are released one
    /// by one, so the last release frees the lock and announces it (a TTL of 1 ms would free it
    /// silently, and other clients' waiters would sleep out the TTL they last read). Between
    /// the calls the key keeps one command timeout, so it cannot run out before the last one
    /// (which then finds nothing, and announces nothing); a call that fails leaves it that long.
    async fn release_ended(&self) -> Result<Release> {
        /// More holds than any owner has: a bound on the loop, not a limit in use.
        const MOST: usize = 1 << 16;
        let sent_at = Instant::now();
        let between = self.client.config().timeout.max(Duration::from_millis(1));
        let mut outcome = Ok(Release::StillHeld);
        for _ in 0..MOST {
            outcome = self.release_call(between).await;
            if !matches!(outcome, Ok(Release::StillHeld)) {
                break;
            }
        }
        // The hold's guards end now, whatever the outcome: its other parts had ended.
        self.ttl_set(sent_at, Duration::ZERO, TtlSet::AtMost);
        outcome
    }

    async fn release_call(&self, lease: Duration) -> Result<Release> {
        let core = self.client.core();
        let config = core.config();
        let receipt = names::fresh_unlock_receipt(self.name());
        let lease_ms = crate::types::millis::clamp_millis(lease);
        let mut tries = 0;
        let reply = loop {
            let call = self.proto.release(ReleaseRequest {
                field: &self.key.field,
                lease_ms,
                receipt: &receipt,
                receipt_px_ms: config.receipt_px_ms(),
                publish: core.messaging().publish_command(),
            });
            match core.run(call, self.name()).await {
                Err(e) if e.is_transient() && tries < config.retry_attempts => {
                    tries += 1;
                    log::debug!("unlock of {} failed ({e:#}); retrying", self.name());
                    tokio::time::sleep(config.retry_delay).await;
                }
                other => break other?,
            }
        };
        self.client.receipts().done(receipt);
        decode_release(reply, self.name())
    }

    /// Hands a release (of the hold `generation`, see [`release`](Self::release)) to the
    /// client's background releases (at most `IN_FLIGHT` run at once, see
    /// `acquisitions::pending`); never blocks, never panics.
    pub(crate) fn release_in_background(&self, generation: Option<u64>) {
        let claim = self.clone();
        // Marked at once: the owner's next acquisition of the lock waits for it, whenever it
        // runs (the ledger); another owner's, briefly (see `acquisitions::pending`).
        let releasing = self.client.ledgers().releasing(&self.key);
        let in_flight = self.client.pending_releases().begin(&self.key.name);
        self.client
            .release_in_background(format!("lock {}", self.name()), move || async move {
                let released = claim.release(generation).await.map(drop);
                drop(releasing);
                drop(in_flight);
                released
            });
    }

    /// Owner-checked set of the TTL to exactly `lease` from now where this owner still holds
    /// the lock (the kind's renewal entry, in its exact form: L-SET, R-SET). `Ok(false)`: the
    /// hold is gone (nothing changed). On success every guard of the owner's hold learns it;
    /// `part`, the leased part of the guard that asked, now ends then.
    pub(crate) async fn set_ttl(&self, lease: Duration, part: Option<u64>) -> Result<bool> {
        let lease_ms = crate::types::millis::lease_millis(lease)?;
        let shape = self.proto.renewal().exact();
        let call = renewal_call(&[(&shape, vec![&*self.key.field])], lease_ms);
        let sent_at = Instant::now();
        // The owner's ledger entry must outlive the TTL this call may set (even without reply).
        let until = crate::types::millis::later(sent_at, lease);
        self.client.ledgers().extend(&self.key(), until);
        let flags = self.client.core().run_flags(call, self.name()).await?;
        let set = flags.first() == Some(&1);
        if set {
            self.ttl_set(sent_at, lease, TtlSet::Exactly { part });
        }
        Ok(set)
    }
}

/// The TTL a partial release sets (see [`Claim::rearm`]).
enum Rearm {
    /// This long, as the guards learn it.
    To(Duration, TtlSet),
    /// The parts left have all ended: the whole hold is released.
    Ended,
}

/// Tells the local queue a release may have freed the lock if the release is dropped midway.
struct TellQueue<'a> {
    claim: &'a Claim,
    armed: bool,
}

impl Drop for TellQueue<'_> {
    fn drop(&mut self) {
        if let (true, Some(tag)) = (self.armed, self.claim.proto.wait_line()) {
            self.claim
                .client
                .wait_lines()
                .released(tag, self.claim.name(), true, None);
        }
    }
}
