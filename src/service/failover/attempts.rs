//! What the watcher decides, pure: which sentinels have a failover attempt under way
//! ([`Attempts`]) and what an event asks for ([`Action`]), when its timers come due and what
//! they ask for ([`Watch`]), and the few rules over addresses it applies (a majority of the
//! sentinels' answers, a failover of the master just reached). No connection here: the I/O
//! side is `watch.rs`.

use std::{collections::HashMap, time::Duration};

use fred::types::config::Server;
use tokio::time::Instant;

use super::event::{Addr, Event};

/// What the watcher knows: which sentinels have an attempt under way, of which master, since
/// when.
#[derive(Debug, Default)]
pub(super) struct Attempts {
    pub(super) trying: HashMap<usize, Addr>,
    pub(super) since: Option<Instant>,
}

/// What to do after an event.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Action {
    Nothing,
    /// Put everything in doubt and hold commands.
    Begin,
    /// Reconnect to this master (`None`: to whichever the sentinels name), then end.
    Switch(Option<Addr>),
    /// End without a reconnect: the attempts were given up.
    End,
    /// Ask the sentinels which master they name, then act on [`Attempts::checked`].
    Check,
}

impl Attempts {
    pub(super) fn on(&mut self, sentinel: usize, event: Event, now: Instant) -> Action {
        match event {
            Event::Began { of } => {
                let first = self.trying.is_empty();
                self.trying.insert(sentinel, of);
                if first {
                    self.since = Some(now);
                    Action::Begin
                } else {
                    Action::Nothing
                }
            }
            Event::Abandoned => {
                if self.trying.remove(&sentinel).is_some() && self.trying.is_empty() {
                    self.since = None;
                    Action::End
                } else {
                    Action::Nothing
                }
            }
            Event::Switched { from, to } => {
                // A switch ends the attempts to replace the master it moved from, not one
                // that began since of the master it moved to: the sentinel that led a
                // failover announces its switch only once it has reconfigured the replicas,
                // by when another sentinel may be replacing the new master already.
                self.trying.retain(|_, of| *of != from);
                if self.trying.is_empty() {
                    self.since = None;
                    Action::Switch(Some(to))
                } else {
                    Action::Nothing
                }
            }
            Event::Reset => {
                // A reset sentinel forgets its failover state: its attempt is over, not the
                // others'.
                if self.trying.remove(&sentinel).is_some() && self.trying.is_empty() {
                    self.since = None;
                }
                Action::Check
            }
            Event::Missed => Action::Check,
        }
    }

    /// After a [`Check`](Action::Check): the sentinels name `named` now (`None`: no majority
    /// answered). With no attempt under way, move there. While one is, only a master other
    /// than the ones being replaced ends it (their switch was missed); the master being
    /// replaced, or no answer, leaves it under way, to end with its switch, every attempt
    /// given up, or the cap.
    pub(super) fn checked(&mut self, named: Option<Addr>) -> Action {
        if self.trying.is_empty() {
            return Action::Switch(named);
        }
        match named {
            Some(to) if !self.trying.values().any(|of| *of == to) => {
                self.trying.clear();
                self.since = None;
                Action::Switch(Some(to))
            }
            _ => Action::Nothing,
        }
    }

    /// An attempt under way for longer than `cap` is given up on (the holds are checked on
    /// the master the connections reach).
    fn expired(&mut self, cap: Duration, now: Instant) -> bool {
        if self.since.is_some_and(|s| now >= s + cap) {
            self.trying.clear();
            self.since = None;
            return true;
        }
        false
    }
}

/// How long a later try to reach the master the sentinels name may take (the watcher reads no
/// event meanwhile), and how long after a failed one the next begins.
pub(super) const RETRY_WITHIN: Duration = Duration::from_secs(1);

/// A place the connections did not reach: when to try again, and the master to try.
pub(super) type Astray = Option<(Instant, Option<Addr>)>;

/// What the watcher knows between events: the attempts under way, whether the connections
/// missed the master the sentinels name, and how long an attempt may last without news.
#[derive(Debug)]
pub(super) struct Watch {
    pub(super) attempts: Attempts,
    /// The connections did not reach the master the sentinels name: when to try again, and
    /// the master to try (the holds stay in doubt meanwhile).
    pub(super) astray: Astray,
    /// How long an attempt may go without a switch (the watchdog timeout).
    pub(super) cap: Duration,
}

/// What a timer that came due asks for.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Due {
    /// An attempt ran past the cap: end the failover on the master the connections reach.
    pub(super) end: bool,
    /// Try again to reach this master (`None`: whichever the sentinels name).
    pub(super) reach: Option<Option<Addr>>,
}

impl Watch {
    pub(super) fn new(cap: Duration) -> Self {
        Self {
            attempts: Attempts::default(),
            astray: None,
            cap,
        }
    }

    /// The next timer: an attempt's cap, or another try to reach the named master.
    pub(super) fn timer(&self) -> Option<Instant> {
        [
            self.attempts.since.map(|s| s + self.cap),
            self.astray.as_ref().map(|a| a.0),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// The timer came due at `now`. An attempt past its cap is given up on; it ends the
    /// failover unless the connections are astray (then their next try does). A try to reach
    /// the named master waits while a failover is under way again (its switch moves the
    /// connections: a try now could end it on the master being replaced); otherwise it is made
    /// once due (the caller sets [`astray`](Self::astray) from its outcome).
    pub(super) fn on_timer(&mut self, now: Instant) -> Due {
        let end = self.attempts.expired(self.cap, now) && self.astray.is_none();
        let mut reach = None;
        if let Some((when, target)) = self.astray.take() {
            if !self.attempts.trying.is_empty() {
                self.astray = Some((now + RETRY_WITHIN, target));
            } else if now >= when {
                reach = Some(target);
            } else {
                self.astray = Some((when, target));
            }
        }
        Due { end, reach }
    }
}

/// The answer more than half of `total` gave.
pub(super) fn majority(answers: &[(String, u16)], total: usize) -> Option<(String, u16)> {
    answers
        .iter()
        .find(|a| answers.iter().filter(|b| b == a).count() * 2 > total)
        .cloned()
}

/// `true` when one of `events` begins a failover of the master at `reached`.
pub(super) fn replacing<'a>(
    events: impl IntoIterator<Item = &'a (usize, Event)>,
    reached: Option<&Server>,
) -> bool {
    events.into_iter().any(|(_, e)| match e {
        Event::Began { of } => is_at(reached, &of.0, of.1),
        _ => false,
    })
}

pub(super) fn is_at(server: Option<&Server>, host: &str, port: u16) -> bool {
    server.is_some_and(|s| &*s.host == host && s.port == port)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn began(port: u16) -> Event {
        Event::Began {
            of: ("h".into(), port),
        }
    }

    fn switched(from: u16, to: u16) -> Event {
        Event::Switched {
            from: ("h".into(), from),
            to: ("h".into(), to),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_failover_ends_with_the_switch_or_when_every_attempt_is_given_up() {
        let now = Instant::now();
        let mut a = Attempts::default();
        // Two sentinels try; one is not elected, the other switches.
        assert_eq!(a.on(0, began(1), now), Action::Begin);
        assert_eq!(a.on(1, began(1), now), Action::Nothing);
        assert_eq!(a.on(1, Event::Abandoned, now), Action::Nothing);
        assert_eq!(
            a.on(0, switched(1, 2), now),
            Action::Switch(Some(("h".into(), 2)))
        );
        assert!(a.since.is_none());
        // Both give up: the end comes with the last.
        assert_eq!(a.on(0, began(2), now), Action::Begin);
        assert_eq!(a.on(2, began(2), now), Action::Nothing);
        assert_eq!(a.on(0, Event::Abandoned, now), Action::Nothing);
        assert_eq!(a.on(2, Event::Abandoned, now), Action::End);
        // An abandon from a sentinel that never tried ends nothing.
        assert_eq!(a.on(1, Event::Abandoned, now), Action::Nothing);
    }

    /// Seen in a chaos run (two failovers 1 s apart): the sentinel that led the first one
    /// announced its switch (1 → 2) after another sentinel had begun replacing 2. That late
    /// announcement must not end the second failover.
    #[tokio::test(start_paused = true)]
    async fn a_late_switch_does_not_end_a_failover_of_the_new_master() {
        let now = Instant::now();
        let mut a = Attempts::default();
        assert_eq!(a.on(0, began(1), now), Action::Begin);
        // The other sentinels switch first (their configuration is updated).
        assert_eq!(
            a.on(1, switched(1, 2), now),
            Action::Switch(Some(("h".into(), 2)))
        );
        // Sentinel 1 begins replacing 2; sentinel 0 announces the first switch only now.
        assert_eq!(a.on(1, began(2), now), Action::Begin);
        assert_eq!(a.on(0, switched(1, 2), now), Action::Nothing);
        assert_eq!(a.on(2, switched(1, 2), now), Action::Nothing);
        assert!(a.since.is_some(), "still under way");
        // The second switch ends it.
        assert_eq!(
            a.on(2, switched(2, 3), now),
            Action::Switch(Some(("h".into(), 3)))
        );
        assert!(a.trying.is_empty());
        // A switch of a master nobody was replacing (its `+try-failover` missed) still moves.
        assert_eq!(
            a.on(0, switched(3, 4), now),
            Action::Switch(Some(("h".into(), 4)))
        );
    }

    fn at(port: u16) -> Option<Addr> {
        Some(("h".into(), port))
    }

    /// Issue 29, 6c: a `+reset-master` of a sentinel that is not replacing the master, heard
    /// mid-failover, used to clear every attempt and move to the master the sentinels named,
    /// which is still the one being replaced: the failover ended there.
    #[tokio::test(start_paused = true)]
    async fn a_reset_of_another_sentinel_does_not_end_a_failover_under_way() {
        let now = Instant::now();
        let mut a = Attempts::default();
        assert_eq!(a.on(0, began(1), now), Action::Begin);
        assert_eq!(a.on(1, Event::Reset, now), Action::Check);
        assert_eq!(
            a.checked(at(1)),
            Action::Nothing,
            "still naming the old master"
        );
        assert_eq!(a.checked(None), Action::Nothing, "no majority");
        assert!(a.since.is_some(), "still under way");
        assert_eq!(a.on(0, switched(1, 2), now), Action::Switch(at(2)));
        assert!(a.trying.is_empty());
    }

    /// The reset of the sentinel that was replacing the master ends its attempt: with none
    /// left, the client goes where the sentinels name (and the failover ends there).
    #[tokio::test(start_paused = true)]
    async fn a_reset_of_the_sentinel_replacing_the_master_ends_its_attempt() {
        let now = Instant::now();
        let mut a = Attempts::default();
        assert_eq!(a.on(0, began(1), now), Action::Begin);
        assert_eq!(a.on(1, began(1), now), Action::Nothing);
        assert_eq!(a.on(0, Event::Reset, now), Action::Check);
        assert_eq!(a.checked(at(1)), Action::Nothing, "sentinel 1 still tries");
        assert_eq!(a.on(1, Event::Reset, now), Action::Check);
        assert!(a.since.is_none());
        assert_eq!(a.checked(at(1)), Action::Switch(at(1)));
        // Without a failover, a reset is a look at where the master is.
        assert_eq!(a.on(2, Event::Reset, now), Action::Check);
        assert_eq!(a.checked(None), Action::Switch(None));
    }

    /// A lagged receiver (some of a sentinel's events missed, maybe its abort, maybe the
    /// switch) checks the master without giving up any attempt: the failover goes on unless
    /// the sentinels name another master (the switch was missed).
    #[tokio::test(start_paused = true)]
    async fn a_lagged_receiver_ends_a_failover_only_if_the_master_moved() {
        let now = Instant::now();
        let mut a = Attempts::default();
        assert_eq!(a.on(0, began(1), now), Action::Begin);
        assert_eq!(a.on(0, Event::Missed, now), Action::Check);
        assert_eq!(a.checked(at(1)), Action::Nothing);
        assert_eq!(a.on(2, Event::Missed, now), Action::Check);
        assert_eq!(a.checked(None), Action::Nothing);
        assert_eq!(a.trying.len(), 1, "the attempt is kept");
        assert!(a.since.is_some());
        // The switch was among the events missed.
        assert_eq!(a.on(0, Event::Missed, now), Action::Check);
        assert_eq!(a.checked(at(2)), Action::Switch(at(2)));
        assert!(a.trying.is_empty() && a.since.is_none());
        // Without a failover, a lag is a look at where the master is.
        assert_eq!(a.on(1, Event::Missed, now), Action::Check);
        assert_eq!(a.checked(at(2)), Action::Switch(at(2)));
    }

    #[test]
    fn a_failover_of_the_master_reached_keeps_the_holds_in_doubt() {
        let reached = fred::types::config::Server::new("h", 2);
        let late = [(0, switched(1, 2)), (1, began(2))];
        assert!(replacing(&late, Some(&reached)));
        let stale = [(0, switched(1, 2)), (1, began(1))];
        assert!(
            !replacing(&stale, Some(&reached)),
            "a failover of the old one"
        );
        assert!(!replacing(&late, None), "not connected");
        assert!(!replacing(&[], Some(&reached)));
    }

    #[test]
    fn the_master_is_the_one_most_sentinels_name() {
        let a = ("h".to_owned(), 1);
        let b = ("h".to_owned(), 2);
        assert_eq!(
            majority(&[a.clone(), a.clone(), b.clone()], 3),
            Some(a.clone())
        );
        assert_eq!(
            majority(&[a.clone(), b.clone()], 3),
            None,
            "no majority of three"
        );
        assert_eq!(
            majority(&[a.clone(), a.clone()], 3),
            Some(a.clone()),
            "one did not answer"
        );
        assert_eq!(majority(std::slice::from_ref(&a), 3), None);
        assert_eq!(majority(&[], 3), None);
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_without_news_expires_after_the_cap() {
        let mut a = Attempts::default();
        let start = Instant::now();
        a.on(0, began(1), start);
        let cap = Duration::from_secs(30);
        tokio::time::advance(Duration::from_secs(29)).await;
        assert!(!a.expired(cap, Instant::now()));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(a.expired(cap, Instant::now()));
        assert!(a.trying.is_empty());
        assert!(!a.expired(cap, Instant::now()), "once");
        // The next attempt begins anew.
        assert_eq!(a.on(1, began(1), Instant::now()), Action::Begin);
    }

    #[tokio::test(start_paused = true)]
    async fn the_watcher_waits_for_the_cap_or_the_next_try_whichever_comes_first() {
        let cap = Duration::from_secs(30);
        let mut w = Watch::new(cap);
        assert_eq!(w.timer(), None, "nothing to wait for");
        let start = Instant::now();
        w.attempts.on(0, began(1), start);
        assert_eq!(w.timer(), Some(start + cap));
        w.astray = Some((start + RETRY_WITHIN, at(2)));
        assert_eq!(w.timer(), Some(start + RETRY_WITHIN));
    }

    #[tokio::test(start_paused = true)]
    async fn an_attempt_past_its_cap_ends_the_failover_unless_the_connections_are_astray() {
        let cap = Duration::from_secs(30);
        let mut w = Watch::new(cap);
        w.attempts.on(0, began(1), Instant::now());
        tokio::time::advance(cap).await;
        assert_eq!(
            w.on_timer(Instant::now()),
            Due {
                end: true,
                reach: None
            }
        );
        assert!(w.attempts.trying.is_empty());

        // Astray: the attempt is given up on, and the next try to reach the master ends it.
        let mut w = Watch::new(cap);
        w.attempts.on(0, began(1), Instant::now());
        w.astray = Some((Instant::now() + cap * 2, at(2)));
        tokio::time::advance(cap).await;
        assert_eq!(
            w.on_timer(Instant::now()),
            Due {
                end: false,
                reach: None
            }
        );
        assert!(w.attempts.trying.is_empty());
        assert!(w.astray.is_some(), "not due yet");
    }

    #[tokio::test(start_paused = true)]
    async fn a_try_to_reach_the_named_master_is_made_when_due_and_waits_out_a_failover() {
        let mut w = Watch::new(Duration::from_secs(30));
        w.astray = Some((Instant::now() + RETRY_WITHIN, at(2)));
        tokio::time::advance(RETRY_WITHIN / 2).await;
        assert_eq!(
            w.on_timer(Instant::now()),
            Due {
                end: false,
                reach: None
            }
        );
        assert!(w.astray.is_some(), "kept until due");
        tokio::time::advance(RETRY_WITHIN / 2).await;
        assert_eq!(
            w.on_timer(Instant::now()),
            Due {
                end: false,
                reach: Some(at(2))
            }
        );
        assert!(
            w.astray.is_none(),
            "taken: the caller sets it from the try's outcome"
        );

        // A failover under way again: the try waits for its switch, one retry period at a time.
        w.astray = Some((Instant::now(), at(2)));
        w.attempts.on(1, began(2), Instant::now());
        assert_eq!(
            w.on_timer(Instant::now()),
            Due {
                end: false,
                reach: None
            }
        );
        assert_eq!(w.astray, Some((Instant::now() + RETRY_WITHIN, at(2))));
    }
}
