//! What a contended run of clients on one hot lock looked like: the measurement shared by the
//! fairness tests beside real Java (`tests/beside_java.rs`) and the bench's fairness section.
//! The run itself (owners of two or more `lock-peer` processes looping lock → hold → unlock)
//! is driven by `peer.rs`'s `hot_lock` and `fleet_on_hot_lock`; this is what is read from its
//! holds: [`Fairness`] for two sides, [`FleetShares`] for a fleet of any size.
//!
//! Definitions (times are the peers' `at=` stamps, the wall clock in ms):
//! * A **hold** starts with an owner's `lock` reply and ends with its `unlock` reply.
//! * Two holds **overlap** when one began before the other's work inside the lock ended: the
//!   lock was acquired on the server before its `lock` reply, and released after the holder's
//!   work ended (its `sleep` reply, just before the `unlock` is sent), so a hold certainly
//!   held the lock from its `at` to its `worked_until`, whatever the replies' latency. Two
//!   holds of a lock that excludes never overlap.
//! * **While both wait** (all, in a fleet): from the first hold to the last hold taken while
//!   every side still had rounds to go (the first side to finish takes its last hold there).
//!   Each side's count of holds in that stretch, and the **smaller side's share** of them.
//! * An owner's **wait** for one acquisition lasts from its previous release (or the start of
//!   the run, for its first acquisition) to its acquisition; it is counted in **holds waited**:
//!   the holds, of either side, that began within it. A side's **longest wait** is the most
//!   holds one of its owners waited for one acquisition.
//! * A side's **longest run**: the most holds it took in a row, the other side taking none.
//!   In a fleet, counted while all waited: a side's longest *turn*.
//! * What **others held while a side waited**: the most holds that sides of a given set took
//!   between two holds of that side, or before its first (the whole run if it never held):
//!   how long the side waited, as a process, in those others' holds. Over the whole run, not
//!   only while all waited: a side the others starve is still waiting when the first of them
//!   is done.

use std::fmt;

/// One hold of the hot lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// When it was acquired (the `lock` reply's `at=`, ms since the epoch).
    pub at: u128,
    /// When it was released (the `unlock` reply's `at=`).
    pub released: u128,
    /// When its holder's work inside the lock ended (the `sleep` reply's `at=`, just before
    /// the `unlock` was sent): the lock was held at least from `at` to here.
    pub worked_until: u128,
    /// Which side took it (0 or 1).
    pub side: usize,
    /// Which owner of that side.
    pub owner: usize,
}

/// What one run of two sides on one hot lock looked like (definitions: the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct Fairness {
    /// The holds in acquisition order, one letter per side (`A` side 0, `B` side 1).
    pub order: String,
    /// Per side: holds while both waited.
    pub while_both: [usize; 2],
    /// The smaller side's share of the holds while both waited (0 to 0.5).
    pub smaller_share: f64,
    /// Per side: the longest wait of one acquisition, in holds waited.
    pub longest_wait: [usize; 2],
    /// Per side: the most holds in a row.
    pub longest_run: [usize; 2],
    /// Holds that overlapped another (see the module doc), described: none where the lock
    /// excludes.
    pub overlaps: Vec<String>,
}

/// What one run of a fleet of `P` processes (sides) on one hot lock looked like (definitions:
/// the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct FleetShares {
    /// The holds in acquisition order, one letter per side (`A` side 0, `B` side 1, ...).
    pub order: String,
    /// Per side: holds while all waited.
    pub while_all: Vec<usize>,
    /// Per side: the longest wait of one acquisition, in holds waited.
    pub longest_wait: Vec<usize>,
    /// Per side: the most holds in a row while all waited (its longest turn).
    pub longest_run: Vec<usize>,
    /// Holds that overlapped another (see the module doc), described: none where the lock
    /// excludes.
    pub overlaps: Vec<String>,
}

/// The holds (sorted by `at`) that began before an earlier one's work ended, each described
/// with the hold it overlapped.
fn overlaps(holds: &[Hold]) -> Vec<String> {
    let mut found = Vec::new();
    // The hold whose work ended last so far: a hold that overlaps any earlier one overlaps it.
    let mut latest: Option<&Hold> = None;
    for h in holds {
        if let Some(l) = latest.filter(|l| h.at < l.worked_until) {
            found.push(format!(
                "{}{} held {}..{} while {}{} held {}..{}",
                char::from(b'A' + h.side as u8),
                h.owner,
                h.at,
                h.worked_until,
                char::from(b'A' + l.side as u8),
                l.owner,
                l.at,
                l.worked_until
            ));
        }
        if latest.is_none_or(|l| h.worked_until > l.worked_until) {
            latest = Some(h);
        }
    }
    found
}

impl FleetShares {
    /// Reads a run of `sides` sides from its holds (in any order); `started`: when the owners
    /// were told to start (ms since the epoch).
    pub fn of(mut holds: Vec<Hold>, started: u128, sides: usize) -> FleetShares {
        holds.sort_by_key(|h| h.at);
        let order: String = holds
            .iter()
            .map(|h| char::from(b'A' + h.side as u8))
            .collect();
        // All sides wait until the first side to finish takes its last hold; a side that took
        // nothing waited all along.
        let end = (0..sides)
            .map(|side| holds.iter().rposition(|h| h.side == side))
            .try_fold(holds.len(), |end, last| last.map(|l| end.min(l + 1)))
            .unwrap_or(holds.len());
        let mut while_all = vec![0usize; sides];
        for h in &holds[..end] {
            while_all[h.side] += 1;
        }
        let mut longest_wait = vec![0usize; sides];
        let mut since: std::collections::HashMap<(usize, usize), u128> = Default::default();
        for (i, h) in holds.iter().enumerate() {
            let from = since.get(&(h.side, h.owner)).copied().unwrap_or(started);
            let waited = holds[..i].iter().filter(|o| o.at >= from).count();
            longest_wait[h.side] = longest_wait[h.side].max(waited);
            since.insert((h.side, h.owner), h.released);
        }
        let mut longest_run = vec![0usize; sides];
        let mut run = (usize::MAX, 0usize);
        for h in &holds[..end] {
            run = if run.0 == h.side {
                (h.side, run.1 + 1)
            } else {
                (h.side, 1)
            };
            longest_run[h.side] = longest_run[h.side].max(run.1);
        }
        FleetShares {
            overlaps: overlaps(&holds),
            order,
            while_all,
            longest_wait,
            longest_run,
        }
    }

    /// The most holds the sides `others` says took between two holds of `side`, or before
    /// its first (the whole run if it never held; after its last it waited no more): how long
    /// `side` waited, as a process, in their holds.
    pub fn held_by_others_while_waiting(
        &self,
        side: usize,
        others: impl Fn(usize) -> bool,
    ) -> usize {
        let mut most = 0;
        let mut since = 0;
        let mut held = false;
        for c in self.order.chars() {
            let s = usize::from(c as u8 - b'A');
            if s == side {
                most = most.max(since);
                since = 0;
                held = true;
            } else if others(s) {
                since += 1;
            }
        }
        if held {
            most
        } else {
            since
        }
    }

    /// Side `side`'s share of the holds while all waited (0 to 1).
    pub fn share(&self, side: usize) -> f64 {
        let total: usize = self.while_all.iter().sum();
        self.while_all[side] as f64 / total.max(1) as f64
    }

    /// The smallest share of any side.
    pub fn smallest_share(&self) -> f64 {
        (0..self.while_all.len())
            .map(|side| self.share(side))
            .fold(f64::INFINITY, f64::min)
    }
}

impl fmt::Display for FleetShares {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sides: Vec<String> = (0..self.while_all.len())
            .map(|s| {
                format!(
                    "{} {} ({:.2}, longest wait {}, longest turn {})",
                    char::from(b'A' + s as u8),
                    self.while_all[s],
                    self.share(s),
                    self.longest_wait[s],
                    self.longest_run[s]
                )
            })
            .collect();
        write!(
            f,
            "while all waited {}; {} overlaps; order {}",
            sides.join(" / "),
            self.overlaps.len(),
            self.order
        )
    }
}

impl Fairness {
    /// Reads a run from its holds (in any order); `started`: when the owners were told to
    /// start (ms since the epoch).
    pub fn of(holds: Vec<Hold>, started: u128) -> Fairness {
        let fleet = FleetShares::of(holds, started, 2);
        let while_both = [fleet.while_all[0], fleet.while_all[1]];
        let total = while_both[0] + while_both[1];
        let smaller_share = if total == 0 {
            0.0
        } else {
            *while_both.iter().min().unwrap() as f64 / total as f64
        };
        let longest_wait = [fleet.longest_wait[0], fleet.longest_wait[1]];
        let FleetShares {
            order, overlaps, ..
        } = fleet;
        let mut longest_run = [0usize; 2];
        let mut current = (' ', 0usize);
        for c in order.chars() {
            current = if current.0 == c {
                (c, current.1 + 1)
            } else {
                (c, 1)
            };
            let side = usize::from(c == 'B');
            longest_run[side] = longest_run[side].max(current.1);
        }
        Fairness {
            order,
            while_both,
            smaller_share,
            longest_wait,
            longest_run,
            overlaps,
        }
    }

    /// Side `side`'s share of the holds while both waited (0 to 1).
    pub fn share(&self, side: usize) -> f64 {
        let total = self.while_both[0] + self.while_both[1];
        if total == 0 {
            0.0
        } else {
            self.while_both[side] as f64 / total as f64
        }
    }
}

impl fmt::Display for Fairness {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "while both waited A {} / B {} holds (smaller share {:.2}); longest wait A {} holds, \
             B {} holds; longest run A {}, B {}; order {}",
            self.while_both[0],
            self.while_both[1],
            self.smaller_share,
            self.longest_wait[0],
            self.longest_wait[1],
            self.longest_run[0],
            self.longest_run[1],
            self.order
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Holds of `hold_ms` each, back to back from t=100, taken in `order` (`A`/`B`, the owner
    /// after each letter).
    fn run(order: &[(char, usize)], hold_ms: u128) -> Vec<Hold> {
        order
            .iter()
            .enumerate()
            .map(|(i, &(side, owner))| {
                let at = 100 + i as u128 * hold_ms;
                Hold {
                    at,
                    released: at + hold_ms,
                    worked_until: at + hold_ms,
                    side: usize::from(side == 'B'),
                    owner,
                }
            })
            .collect()
    }

    #[test]
    fn turns_taken_one_by_one_are_fair() {
        let holds = run(
            &[('A', 1), ('B', 1), ('A', 2), ('B', 2), ('A', 1), ('B', 1)],
            50,
        );
        let f = Fairness::of(holds, 100);
        assert_eq!(f.order, "ABABAB");
        // A's last hold is the fifth: B's sixth came when A no longer waited.
        assert_eq!(f.while_both, [3, 2]);
        assert_eq!(f.smaller_share, 0.4);
        assert_eq!(f.longest_run, [1, 1]);
        // B's first owner waited through A1's first hold; A1 waited from its release (150)
        // through B1, A2, B2 (they began at 150, 200, 250).
        assert_eq!(f.longest_wait, [3, 3]);
    }

    #[test]
    fn the_share_counts_only_while_both_wait() {
        // A takes four in a row, then B, then A finishes; B's last two come after A's last.
        let holds = run(
            &[
                ('A', 1),
                ('A', 2),
                ('A', 1),
                ('A', 2),
                ('B', 1),
                ('A', 1),
                ('B', 1),
                ('B', 2),
            ],
            10,
        );
        let f = Fairness::of(holds, 100);
        assert_eq!(f.while_both, [5, 1]);
        assert!((f.smaller_share - 1.0 / 6.0).abs() < 1e-9);
        assert!((f.share(0) - 5.0 / 6.0).abs() < 1e-9);
        assert_eq!(f.longest_run, [4, 2]);
        // B2 waited from the start through the first seven holds.
        assert_eq!(f.longest_wait[1], 7);
    }

    #[test]
    fn a_fleet_counts_every_side_while_all_wait() {
        // Three sides: C's last hold is the fifth; A and B go on after it.
        let holds: Vec<Hold> = [(0, 1), (1, 1), (2, 1), (0, 2), (2, 2), (0, 1), (1, 1)]
            .iter()
            .enumerate()
            .map(|(i, &(side, owner))| {
                let at = 100 + i as u128 * 10;
                Hold {
                    at,
                    released: at + 10,
                    worked_until: at + 10,
                    side,
                    owner,
                }
            })
            .collect();
        let f = FleetShares::of(holds, 100, 3);
        assert_eq!(f.order, "ABCACAB");
        assert_eq!(f.while_all, vec![2, 1, 2]);
        assert!((f.smallest_share() - 0.2).abs() < 1e-9);
        // B1 waited from its release (120) through C1, A2, C2, A1 (they began at 120..150);
        // C2 from the start through A1, B1, C1, A2.
        assert_eq!(f.longest_wait, vec![4, 4, 4]);
        // While all waited (ABCAC): one hold in a row each. B, as a process, waited through
        // C, A, C, A (four holds of A and C, two of C alone) between its holds; C through A, B
        // before its first; after its last hold a side waits no more.
        assert_eq!(f.longest_run, vec![1, 1, 1]);
        assert_eq!(f.held_by_others_while_waiting(1, |s| s != 1), 4);
        assert_eq!(f.held_by_others_while_waiting(1, |s| s == 2), 2);
        assert_eq!(f.held_by_others_while_waiting(2, |s| s != 2), 2);
        assert_eq!(f.held_by_others_while_waiting(0, |s| s != 0), 2);
        // A side that never held waited the whole run.
        assert_eq!(
            FleetShares::of(run(&[('A', 1), ('B', 1)], 10), 100, 3)
                .held_by_others_while_waiting(2, |s| s != 2),
            2
        );
        // A side that never held: no share, and the whole run was "while all waited".
        let f = FleetShares::of(run(&[('A', 1), ('B', 1)], 10), 100, 3);
        assert_eq!(f.while_all, vec![1, 1, 0]);
        assert_eq!(f.smallest_share(), 0.0);
    }

    #[test]
    fn holds_that_overlap_are_found_and_back_to_back_ones_are_not() {
        // Back to back (one's work ends the millisecond the next is acquired): no overlap,
        // though each `unlock` reply came after the next `lock` reply.
        let mut holds = run(&[('A', 1), ('B', 1), ('A', 2), ('B', 2)], 50);
        for h in &mut holds {
            h.released += 3;
        }
        let f = FleetShares::of(holds.clone(), 100, 2);
        assert!(f.overlaps.is_empty(), "{:?}", f.overlaps);
        // B2 acquired 1 ms before A2's work ended; B1 held through the end of A2 too.
        holds[3].at -= 1;
        holds[1].worked_until = holds[3].at + 20;
        let f = Fairness::of(holds, 100);
        assert_eq!(
            f.overlaps,
            vec![
                "A2 held 200..250 while B1 held 150..269",
                "B2 held 249..300 while B1 held 150..269"
            ]
        );
    }

    #[test]
    fn a_side_that_never_got_the_lock_has_no_share() {
        let f = Fairness::of(run(&[('A', 1), ('A', 2)], 10), 100);
        assert_eq!(f.while_both, [2, 0]);
        assert_eq!(f.smaller_share, 0.0);
        assert_eq!(Fairness::of(Vec::new(), 0).smaller_share, 0.0);
    }
}
