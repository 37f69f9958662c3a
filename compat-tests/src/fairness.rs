//! What a contended run of two clients on one hot lock looked like: the measurement shared by
//! the fairness test beside real Java (`tests/beside_java.rs`) and the bench's fairness
//! section. The run itself (owners of two `lock-peer` processes looping lock → hold → unlock)
//! is driven by `peer.rs`'s `hot_lock`; this is what is read from its holds.
//!
//! Definitions (times are the peers' `at=` stamps, the wall clock in ms):
//! * A **hold** starts with an owner's `lock` reply and ends with its `unlock` reply.
//! * **While both wait**: from the first hold to the last hold taken while both sides still had
//!   rounds to go (the first side to finish takes its last hold there). Each side's count of
//!   holds in that stretch, and the **smaller side's share** of them.
//! * An owner's **wait** for one acquisition lasts from its previous release (or the start of
//!   the run, for its first acquisition) to its acquisition; it is counted in **holds waited**:
//!   the holds, of either side, that began within it. A side's **longest wait** is the most
//!   holds one of its owners waited for one acquisition.
//! * A side's **longest run**: the most holds it took in a row, the other side taking none.

use std::fmt;

/// One hold of the hot lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hold {
    /// When it was acquired (the `lock` reply's `at=`, ms since the epoch).
    pub at: u128,
    /// When it was released (the `unlock` reply's `at=`).
    pub released: u128,
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
}

impl Fairness {
    /// Reads a run from its holds (in any order); `started`: when the owners were told to
    /// start (ms since the epoch).
    pub fn of(mut holds: Vec<Hold>, started: u128) -> Fairness {
        holds.sort_by_key(|h| h.at);
        let order: String = holds
            .iter()
            .map(|h| if h.side == 0 { 'A' } else { 'B' })
            .collect();
        // Both sides wait until the first side to finish takes its last hold.
        let last = |side: usize| holds.iter().rposition(|h| h.side == side);
        let end = match (last(0), last(1)) {
            (Some(a), Some(b)) => a.min(b) + 1,
            // One side took nothing: it waited all along.
            _ => holds.len(),
        };
        let mut while_both = [0usize; 2];
        for h in &holds[..end] {
            while_both[h.side] += 1;
        }
        let smaller_share = if end == 0 {
            0.0
        } else {
            *while_both.iter().min().unwrap() as f64 / end as f64
        };
        let mut longest_wait = [0usize; 2];
        let mut since: std::collections::HashMap<(usize, usize), u128> = Default::default();
        for (i, h) in holds.iter().enumerate() {
            let from = since.get(&(h.side, h.owner)).copied().unwrap_or(started);
            let waited = holds[..i].iter().filter(|o| o.at >= from).count();
            longest_wait[h.side] = longest_wait[h.side].max(waited);
            since.insert((h.side, h.owner), h.released);
        }
        let mut longest_run = [0usize; 2];
        let mut current = (usize::MAX, 0usize);
        for h in &holds {
            current = if current.0 == h.side {
                (h.side, current.1 + 1)
            } else {
                (h.side, 1)
            };
            longest_run[h.side] = longest_run[h.side].max(current.1);
        }
        Fairness {
            order,
            while_both,
            smaller_share,
            longest_wait,
            longest_run,
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
    fn a_side_that_never_got_the_lock_has_no_share() {
        let f = Fairness::of(run(&[('A', 1), ('A', 2)], 10), 100);
        assert_eq!(f.while_both, [2, 0]);
        assert_eq!(f.smaller_share, 0.0);
        assert_eq!(Fairness::of(Vec::new(), 0).smaller_share, 0.0);
    }
}
