//! Leader election on the fenced lock's wire: [`Election`] (a campaign is an acquisition of
//! the fenced lock of the election's name, its term the fencing token), [`Leadership`],
//! [`LeaderWatch`] (who leads, read from the lock hash, so a Java `RFencedLock` holder leads
//! like a Rust one) and the optional proclamation beside the lock.

use std::{future::Future, time::Duration};

use fred::types::{Key, Value};
use tokio::sync::broadcast::{error::RecvError, Receiver};

use super::watch::{scoped, HoldWatch};
use crate::{
    client::Client,
    conn::scripts::{ScriptCall, ScriptId},
    error::{Error, Result},
    lock::{FencedGuard, LockEvents},
    service::pubsub::Subscription,
    service::watchdog::HoldState,
    types::names,
};

/// How long a [`LeaderWatch`] from [`Election::observe`] waits at most between two looks when
/// no message or key event wakes it.
pub const DEFAULT_OBSERVE_POLL: Duration = Duration::from_secs(1);

/// The first look after a wake-up or a change comes this soon, then each wait doubles up to the
/// poll bound: a new leader's acquisition publishes nothing, so it is looked for quickly after
/// the old one went.
const FIRST_LOOK: Duration = Duration::from_millis(10);

/// A leader election: every campaign, Rust or Java, contends for the fenced lock of the
/// election's name (a Java instance that campaigns with `RFencedLock.lock()` on that name
/// competes in the same election). The winner leads until it resigns or loses its hold; its
/// term is the acquisition's fencing token, larger than every earlier term.
///
/// ```no_run
/// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
/// let election = client.get_election("scheduler");
/// let leadership = election.campaign().await?; // waits until this instance leads
/// leadership.proclaim("10.0.0.7:8080").await?; // optional: tell observers where it is
/// println!("leading in term {}", leadership.term());
/// tokio::select! {
///     _ = leadership.lost() => eprintln!("no longer certain to lead: stop at once"),
///     _ = tokio::time::sleep(std::time::Duration::from_secs(5)) => {} // lead
/// }
/// leadership.resign().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Election {
    client: Client,
    name: String,
    raw: String,
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Election").field("name", &self.raw).finish()
    }
}

/// Who leads an election, as [`Election::leader`] and [`LeaderWatch`] read it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// The holder's owner field, `<client uuid>:<owner id>` (a Java holder: `<uuid>:<thread
    /// id>`); [`Client::id`] names this crate's clients.
    pub holder: String,
    /// The election's term: the lock's fencing-token counter, the token of the latest
    /// acquisition (the leader's own, unless the holder re-entered).
    pub term: u64,
    /// The value the leader proclaimed ([`Leadership::proclaim`]), if it did.
    pub value: Option<String>,
}

impl Leader {
    /// `true` when the leader is an owner of `client`.
    pub fn is_of(&self, client: &Client) -> bool {
        self.holder
            .strip_prefix(client.id())
            .is_some_and(|rest| rest.starts_with(':'))
    }
}

/// This instance's leadership of an [`Election`], from [`Election::campaign`]. It holds the
/// election's fenced lock (renewed by the watchdog) until [`resign`](Self::resign) or drop.
///
/// A leader in doubt must act as if it does not lead: [`is_leading`](Self::is_leading) is
/// `true` only while the hold is [`Held`](HoldState::Held), and [`lost`](Self::lost) resolves
/// the moment it is in doubt (the connection to the node dropped: another instance may lead by
/// now) or lost.
///
/// # Drop
/// Dropping it resigns in the background (the lock is released as a guard's drop releases it);
/// a proclamation is then cleared by the next look of any observer.
#[must_use = "dropping the leadership resigns at once"]
pub struct Leadership {
    guard: FencedGuard,
    election: Election,
}

impl std::fmt::Debug for Leadership {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Leadership")
            .field("election", &self.election.raw)
            .field("term", &self.term())
            .field("state", &self.state())
            .finish()
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::Null => None,
        v => v.as_str().map(|s| s.into_owned()),
    }
}

impl Election {
    /// The name the election was created with.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The raw name of its lock in Redis (after the name mapper).
    pub fn raw_name(&self) -> &str {
        &self.raw
    }

    fn proclamation_key(&self) -> Key {
        Key::from(names::prefix_name("redisson_lock_leader", &self.raw))
    }

    fn token_key(&self) -> Key {
        Key::from(names::prefix_name("redisson_lock_token", &self.raw))
    }

    /// Waits until this instance leads, without limit (a fresh owner for every campaign, so
    /// two campaigns of one process exclude each other).
    ///
    /// # Errors
    /// As [`Lock::lock`](crate::Lock::lock).
    ///
    /// # Cancel safety
    /// As [`Lock::lock`](crate::Lock::lock): a dropped campaign leaves nothing behind.
    pub async fn campaign(&self) -> Result<Leadership> {
        // A campaign is an owner of its own (a second campaign of the task does not re-enter).
        let guard = self
            .client
            .get_fenced_lock_with_owner(&self.name, crate::types::owner::Owner::new())
            .lock()
            .await?;
        Ok(self.elected(guard))
    }

    /// Campaigns for at most `wait` (zero: one attempt); `None` if another leads all along.
    ///
    /// # Errors
    /// As [`Lock::try_lock_for`](crate::Lock::try_lock_for).
    ///
    /// # Cancel safety
    /// As [`campaign`](Self::campaign).
    pub async fn try_campaign_for(&self, wait: Duration) -> Result<Option<Leadership>> {
        let lock = self
            .client
            .get_fenced_lock_with_owner(&self.name, crate::types::owner::Owner::new());
        Ok(lock.try_lock_for(wait).await?.map(|g| self.elected(g)))
    }

    fn elected(&self, guard: FencedGuard) -> Leadership {
        crate::observe::election(&self.raw, "elected");
        Leadership {
            guard,
            election: self.clone(),
        }
    }

    /// Who leads now (one look; `None` when nobody holds the lock).
    ///
    /// # Errors
    /// A Redis or connection error; [`Error::WrongType`] if a key of the election holds
    /// another type.
    ///
    /// # Cancel safety
    /// Cancel safe (a read; it may delete a stale proclamation).
    pub async fn leader(&self) -> Result<Option<Leader>> {
        let call = ScriptCall::new(
            ScriptId::ElectionView,
            vec![
                Key::from(self.raw.as_str()),
                self.token_key(),
                self.proclamation_key(),
            ],
            vec![],
        );
        let reply = self.client.core().run(call, &self.raw).await?;
        let bad = || crate::conn::core::unexpected(&self.raw, "election view reply");
        let Value::Array(parts) = reply else {
            return Err(bad());
        };
        let holder = parts.first().and_then(text).ok_or_else(bad)?;
        if holder.is_empty() {
            return Ok(None);
        }
        let term = parts
            .get(2)
            .and_then(text)
            .and_then(|t| t.parse::<u64>().ok())
            .unwrap_or(0);
        let value = parts.get(3).and_then(text);
        Ok(Some(Leader {
            holder,
            term,
            value,
        }))
    }

    /// A stream of who leads ([`LeaderWatch::next`]), looking every
    /// [`DEFAULT_OBSERVE_POLL`] at most; see [`observe_every`](Self::observe_every).
    ///
    /// # Errors
    /// As [`observe_every`](Self::observe_every).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no subscription behind.
    pub async fn observe(&self) -> Result<LeaderWatch> {
        self.observe_every(DEFAULT_OBSERVE_POLL).await
    }

    /// A stream of who leads. It looks again at once when the lock's unlock channel carries a
    /// message (every release and forced unlock, Java's too) and, where the server sends the
    /// lock's key events (`notify-keyspace-events` with `Egx`), when its key is deleted or
    /// expires; right after a wake-up or a change it looks again within milliseconds (a new
    /// leader's acquisition publishes nothing), then at most every `poll`.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let mut leaders = client.get_election("scheduler").observe().await?;
    /// while let Some(change) = leaders.next().await {
    ///     match change? {
    ///         Some(leader) => println!("{} leads (term {})", leader.holder, leader.term),
    ///         None => println!("nobody leads"),
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`InvalidArgument`](Error::InvalidArgument) for a zero `poll`; a subscription error
    /// (timeout, permission).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves no subscription behind.
    pub async fn observe_every(&self, poll: Duration) -> Result<LeaderWatch> {
        if poll.is_zero() {
            return Err(Error::InvalidArgument(
                "the observe poll bound must be positive".into(),
            ));
        }
        let unlocks = self
            .client
            .pubsub()
            .subscribe(&names::lock_channel(&self.raw));
        let messages = unlocks.payloads();
        unlocks
            .ready(self.client.config().subscription_timeout)
            .await?;
        // Key events where the server sends them; the unlock channel and the poll otherwise.
        let events = self.client.get_lock(&self.name).events().await.ok();
        Ok(LeaderWatch {
            election: self.clone(),
            last: None,
            messages: Some(messages),
            unlocks,
            events,
            poll,
            step: FIRST_LOOK,
        })
    }

    /// Keeps campaigning and runs `body` while this instance leads: the body's future is
    /// dropped the moment leadership is in doubt or lost. A term in doubt is kept: the body
    /// starts again in the same term once the hold is confirmed, and a new campaign begins only
    /// once it is lost (after a growing pause when terms keep ending within a watchdog timeout,
    /// so a failover that leaves every new hold in doubt spends a bounded number of terms and
    /// never spins). When the body ends, the leadership is resigned and the body's result
    /// returned. The body gets the [`HoldWatch`] of its term (its [`token`](HoldWatch::token) is
    /// the term, for fencing writes), and [`assert_locked`](super::watch::assert_locked) works inside
    /// it.
    ///
    /// ```no_run
    /// # async fn demo(client: redisson_lock::Client) -> redisson_lock::Result<()> {
    /// let election = client.get_election("scheduler");
    /// election
    ///     .run_as_leader(|term| async move {
    ///         loop {
    ///             // schedule work, fenced with term.token()
    ///             tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    ///             # return Ok::<(), redisson_lock::Error>(());
    ///         }
    ///     })
    ///     .await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// A campaign's error (through `E::from`), or whatever the body returns.
    ///
    /// # Cancel safety
    /// Dropping the future drops the body (if running) and resigns in the background.
    pub async fn run_as_leader<F, Fut, T, E>(&self, mut body: F) -> std::result::Result<T, E>
    where
        F: FnMut(HoldWatch) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
        E: From<Error>,
    {
        let timeout = self.client.config().lock_watchdog_timeout;
        let mut pause = TermPause::new(timeout);
        loop {
            let leadership = self.campaign().await.map_err(E::from)?;
            let began = tokio::time::Instant::now();
            // The term: the body runs while it is held, waits while it is in doubt.
            while leadership.settled().await == HoldState::Held {
                let watch = leadership.watch();
                let run = scoped(watch.clone(), body(watch));
                let outcome = {
                    let lost = leadership.lost();
                    tokio::pin!(lost, run);
                    tokio::select! {
                        biased;
                        () = &mut lost => None,
                        result = &mut run => Some(result),
                    }
                    // The body's future is dropped here, before the leadership.
                };
                if let Some(result) = outcome {
                    if let Err(e) = leadership.resign().await {
                        log::warn!("resigning {} after the body ended failed: {e:#}", self.raw);
                    }
                    return result;
                }
                log::info!(
                    "leadership of {} in term {} is {:?}: body stopped until it is settled",
                    self.raw,
                    leadership.term(),
                    leadership.state()
                );
                crate::observe::election(&self.raw, "in_doubt");
            }
            log::info!(
                "leadership of {} in term {} is lost: campaigning again",
                self.raw,
                leadership.term()
            );
            crate::observe::election(&self.raw, "lost");
            drop(leadership);
            tokio::time::sleep(pause.after(began.elapsed())).await;
        }
    }
}

/// The pause before a new campaign after a term was lost: none after a term that lasted a
/// watchdog timeout or more; after shorter ones, a pause that starts at [`TermPause::FIRST`]
/// and doubles up to the watchdog timeout while terms keep ending that soon (each campaign
/// takes a fencing token and its release wakes every campaigner and watcher).
struct TermPause {
    next: Duration,
    max: Duration,
}

impl TermPause {
    const FIRST: Duration = Duration::from_millis(50);

    fn new(max: Duration) -> Self {
        Self {
            next: Self::FIRST,
            max: max.max(Self::FIRST),
        }
    }

    /// The pause after a term that lasted `lasted`.
    fn after(&mut self, lasted: Duration) -> Duration {
        if lasted >= self.max {
            self.next = Self::FIRST;
            return Duration::ZERO;
        }
        let pause = self.next;
        self.next = (self.next * 2).min(self.max);
        pause
    }
}

impl Leadership {
    /// The term: this acquisition's fencing token, larger than every earlier term of the
    /// election (as long as the token counter survives; see
    /// [`FencedGuard::token`](crate::FencedGuard::token)). Pass it with every write a leader
    /// makes, and have the resource refuse lower terms.
    pub fn term(&self) -> u64 {
        self.guard.token()
    }

    /// This leader's owner field (what [`Leader::holder`] shows).
    pub fn holder(&self) -> &str {
        self.guard.owner_field()
    }

    /// The election this leadership is of.
    pub fn election(&self) -> &Election {
        &self.election
    }

    /// Where the hold of the election's lock stands (as [`Guard::state`](crate::Guard::state)).
    pub fn state(&self) -> HoldState {
        self.guard.state()
    }

    /// The instant (monotonic clock) until which the leadership is known to hold, unless lost
    /// earlier (as [`Guard::valid_until`](crate::Guard::valid_until)).
    pub fn valid_until(&self) -> tokio::time::Instant {
        self.guard.valid_until()
    }

    /// `true` only while the hold is [`Held`](HoldState::Held): a leader in doubt does not
    /// lead.
    pub fn is_leading(&self) -> bool {
        self.state() == HoldState::Held
    }

    /// Resolves the moment the leadership is in doubt or lost: stop acting as leader then.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) {
        self.guard.lost().await
    }

    /// Resolves once the leadership is not in doubt, with its state: [`Held`](HoldState::Held)
    /// (confirmed: lead again) or [`Lost`](HoldState::Lost) (campaign again).
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future has no effect on the leadership.
    pub async fn settled(&self) -> HoldState {
        self.guard.settled().await
    }

    /// An owned view of the hold, for tasks the leader spawns.
    pub fn watch(&self) -> HoldWatch {
        HoldWatch::of(&self.guard)
    }

    /// Publishes `value` beside the lock (e.g. this leader's address) for
    /// [`Leader::value`], in a key of its own that Java ignores
    /// (`redisson_lock_leader:{name}`, a hash naming the leader). Only a current holder can
    /// proclaim; a proclamation outlives its leader only until the next look of an observer.
    /// `Ok(false)` when this instance no longer holds the lock.
    ///
    /// # Errors
    /// A Redis or connection error.
    ///
    /// # Cancel safety
    /// The value may or may not be published if the future is dropped.
    pub async fn proclaim(&self, value: &str) -> Result<bool> {
        self.proclamation("set", value).await
    }

    async fn proclamation(&self, op: &str, value: &str) -> Result<bool> {
        let e = &self.election;
        let call = ScriptCall::new(
            ScriptId::ElectionProclaim,
            vec![Key::from(e.raw.as_str()), e.proclamation_key()],
            vec![
                Value::from(self.holder()),
                Value::from(op),
                Value::from(value),
            ],
        );
        let reply = e.client.core().run(call, &e.raw).await?;
        Ok(reply.as_i64() == Some(1))
    }

    /// Resigns: clears this leader's proclamation, then releases the lock (waking the other
    /// campaigns at once). A leadership already lost resigns without error.
    ///
    /// # Errors
    /// A Redis or connection error (the lock then ends at the latest when its TTL runs out:
    /// its renewal stopped).
    ///
    /// # Cancel safety
    /// If dropped, the release may or may not have reached Redis; the renewal has stopped.
    pub async fn resign(self) -> Result<()> {
        crate::observe::election(&self.election.raw, "resigned");
        let cleared = self.proclamation("clear", "").await;
        match self.guard.unlock().await {
            Ok(_) | Err(Error::NotHeld { .. }) => cleared.map(drop),
            Err(e) => Err(e),
        }
    }
}

/// Who leads an [`Election`], as it changes ([`Election::observe`]).
pub struct LeaderWatch {
    election: Election,
    /// The last value returned (`None` before the first).
    last: Option<Option<Leader>>,
    messages: Option<Receiver<Value>>,
    unlocks: Subscription,
    events: Option<LockEvents>,
    poll: Duration,
    step: Duration,
}

impl std::fmt::Debug for LeaderWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderWatch")
            .field("election", &self.election.raw)
            .field("last", &self.last)
            .field("key_events", &self.events.is_some())
            .finish()
    }
}

impl LeaderWatch {
    /// The first call returns who leads now; every later call waits until that changes (the
    /// holder, the term or the proclaimed value) and returns the new value: `Some(Ok(None))`
    /// when nobody leads. `None` once the client is shut down.
    ///
    /// # Cancel safety
    /// Cancel safe: a change not returned because the future was dropped is returned by the
    /// next call.
    pub async fn next(&mut self) -> Option<Result<Option<Leader>>> {
        loop {
            if self.election.client.is_closed() {
                return None;
            }
            match self.election.leader().await {
                Ok(now) => {
                    if self.last.as_ref() != Some(&now) {
                        self.last = Some(now.clone());
                        self.step = FIRST_LOOK;
                        return Some(Ok(now));
                    }
                }
                Err(Error::Shutdown) => return None,
                Err(_) if self.election.client.is_closed() => return None,
                Err(e) => return Some(Err(e)),
            }
            let step = self.step;
            self.step = (self.step * 2).min(self.poll);
            let woken = tokio::select! {
                got = recv(&mut self.messages) => got,
                got = event(&mut self.events) => got,
                () = tokio::time::sleep(step) => false,
                // Looks once more: the client is closed now, so the watch ends.
                () = self.unlocks.shut_down() => true,
            };
            if woken {
                self.step = FIRST_LOOK;
            }
        }
    }
}

/// The next unlock message (`true`); pending forever once the channel is closed.
async fn recv(messages: &mut Option<Receiver<Value>>) -> bool {
    let Some(rx) = messages else {
        return std::future::pending().await;
    };
    match rx.recv().await {
        Ok(_) | Err(RecvError::Lagged(_)) => true,
        Err(RecvError::Closed) => {
            *messages = None;
            false
        }
    }
}

/// The next key event (`true`); pending forever without events.
async fn event(events: &mut Option<LockEvents>) -> bool {
    let Some(ev) = events else {
        return std::future::pending().await;
    };
    if ev.next().await.is_some() {
        true
    } else {
        *events = None;
        false
    }
}

impl Client {
    /// The leader election `name`, on the fenced lock of that name (Redisson's
    /// `RFencedLock`): see [`Election`].
    pub fn get_election(&self, name: &str) -> Election {
        Election {
            client: self.clone(),
            name: name.to_owned(),
            raw: self.map_name(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_that_end_soon_pause_the_campaign_longer_each_time_and_a_long_one_resets_it() {
        let timeout = Duration::from_secs(3);
        let mut pause = TermPause::new(timeout);
        let soon = Duration::from_millis(5);
        let pauses: Vec<Duration> = (0..8).map(|_| pause.after(soon)).collect();
        let ms = |n| Duration::from_millis(n);
        assert_eq!(
            pauses,
            [
                ms(50),
                ms(100),
                ms(200),
                ms(400),
                ms(800),
                ms(1600),
                ms(3000),
                ms(3000)
            ]
        );
        assert_eq!(pause.after(timeout), Duration::ZERO, "a term that held");
        assert_eq!(pause.after(soon), ms(50), "starts over");
    }

    #[test]
    fn the_proclamation_key_shares_the_locks_slot() {
        assert_eq!(
            names::prefix_name("redisson_lock_leader", "s"),
            "redisson_lock_leader:{s}"
        );
        assert_eq!(
            names::prefix_name("redisson_lock_leader", "{t}:s"),
            "redisson_lock_leader:{t}:s"
        );
    }
}
