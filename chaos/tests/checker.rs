//! The checker on hand-written histories: an injected unannounced overlap is reported as one,
//! and announced ones, sequential holds and re-entry are not.

use redisson_lock_chaos::check;

const MS: u64 = 1_000_000;

/// A hold of `lock` by process `p`, owner `o`: acquired at `acq` ms with a deadline at
/// `deadline` ms, critical section ended at `end` ms.
fn hold(p: u32, o: u32, seq: u64, lock: &str, acq: u64, deadline: u64, end: u64) -> Vec<String> {
    vec![
        format!("B {p} {o} {seq} {} {lock} reentrant", (acq - 1) * MS),
        format!("A {p} {o} {seq} {} - {}", acq * MS, deadline * MS),
        format!("E {p} {o} {seq} {}", end * MS),
        format!("R {p} {o} {seq} {} ok", (end + 1) * MS),
    ]
}

fn run(lines: &[String]) -> redisson_lock_chaos::Report {
    check(lines.iter().map(String::as_str), 30_000).expect("a valid history")
}

#[test]
fn injected_unannounced_overlap_is_reported() {
    // p0 holds from 100 to 5000 ms (deadline 3000 ms, never told); p1 acquires at 1000 ms.
    let mut h = hold(0, 0, 1, "x", 100, 3000, 5000);
    h.extend(hold(1, 0, 1, "x", 1000, 4000, 1200));
    let r = run(&h);
    assert_eq!(r.ops, 2);
    assert_eq!(r.overlaps, 1);
    assert_eq!(r.unannounced, 1, "{}", r.summary());
    assert_eq!(r.examples.len(), 1);
    assert!(r.examples[0].contains("p0/o0/#1"), "{}", r.examples[0]);
}

#[test]
fn an_overlap_after_the_deadline_is_announced() {
    // The later holder acquires at 3500 ms, after the earlier one's deadline (3000 ms).
    let mut h = hold(0, 0, 1, "x", 100, 3000, 5000);
    h.extend(hold(1, 0, 1, "x", 3500, 6000, 3600));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced), (1, 0), "{}", r.summary());
}

#[test]
fn an_overlap_after_being_told_is_announced_unless_held_again() {
    // Told (in doubt) at 900 ms, the later one acquires at 1000 ms: announced.
    let mut h = hold(0, 0, 1, "x", 100, 3000, 5000);
    h.push(format!("T 0 0 1 {} InDoubt", 900 * MS));
    h.extend(hold(1, 0, 1, "x", 1000, 4000, 1200));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced), (1, 0), "{}", r.summary());

    // The doubt was cleared (a look at 950 ms says held, valid until 3950 ms) before the
    // later acquisition: the holder was told it held the lock, so this one is unannounced.
    h.push(format!("O 0 0 1 {} Held {}", 950 * MS, 3950 * MS));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced), (1, 1), "{}", r.summary());

    // A look at 980 ms that says in doubt (the state, not the loss future) is being told.
    h.push(format!("O 0 0 1 {} InDoubt {}", 980 * MS, 3950 * MS));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced), (1, 0), "{}", r.summary());
}

#[test]
fn a_hold_that_came_back_in_doubt_is_announced_until_confirmed() {
    // p0's acquisition returned in doubt (taken across a failover): p1 acquiring at 1000 ms
    // overlaps an announced hold.
    let mut h = hold(0, 0, 1, "x", 100, 3000, 5000);
    h[1].push_str(" InDoubt");
    h.extend(hold(1, 0, 1, "x", 1000, 4000, 1200));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced), (1, 0), "{}", r.summary());
    // Confirmed held at 500 ms: no longer told.
    h.push(format!("O 0 0 1 {} Held {}", 500 * MS, 3500 * MS));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced), (1, 1), "{}", r.summary());
    // The state field says held: as without it.
    let mut h = hold(0, 0, 1, "x", 100, 3000, 5000);
    h[1].push_str(" Held");
    h.extend(hold(1, 0, 1, "x", 1000, 4000, 1200));
    assert_eq!(run(&h).unannounced, 1);
}

#[test]
fn sequential_holds_and_reentry_are_not_overlaps() {
    let mut h = hold(0, 0, 1, "x", 100, 3000, 500);
    h.extend(hold(1, 0, 1, "x", 600, 3600, 700));
    // The same owner again while its earlier hold is open (its own hold: not an overlap).
    h.extend(hold(1, 0, 2, "x", 650, 3650, 690));
    // Another lock at the same time.
    h.extend(hold(2, 0, 1, "y", 100, 3100, 900));
    let r = run(&h);
    assert_eq!(r.ops, 4);
    assert_eq!(r.overlaps, 0, "{}", r.summary());
}

#[test]
fn stale_fenced_writes_accepted_are_counted() {
    let mut h = hold(0, 0, 1, "f", 100, 3000, 5000);
    h.extend(hold(1, 0, 1, "f", 3500, 6500, 4000));
    // p1 (token 8) writes at 3600 ms, accepted; p0 (token 7) writes at 4500 ms.
    h.push(format!("W 1 0 1 {} {} 8 1", 3600 * MS, 3601 * MS));
    h.push(format!("W 0 0 1 {} {} 7 0", 4500 * MS, 4501 * MS));
    let r = run(&h);
    assert_eq!(
        (r.fenced_writes, r.fenced_rejected, r.stale_accepted),
        (2, 1, 0)
    );
    // A register that accepted the stale write is caught.
    let last = h.len() - 1;
    h[last] = format!("W 0 0 1 {} {} 7 1", 4500 * MS, 4501 * MS);
    let r = run(&h);
    assert_eq!(r.stale_accepted, 1, "{}", r.summary());
    // So is an equal token from another hold.
    h[last] = format!("W 0 0 1 {} {} 8 1", 4500 * MS, 4501 * MS);
    let r = run(&h);
    assert_eq!(r.stale_accepted, 1, "{}", r.summary());
}

#[test]
fn unfinished_and_overlong_waits_are_stuck() {
    let mut h = vec![format!("B 0 0 1 {} x fair", 100 * MS)];
    h.push(format!("B 0 1 1 {} x fair", 100 * MS));
    h.push(format!("N 0 1 1 {} none", 40_100 * MS));
    h.push(format!("B 0 2 1 {} x fair", 100 * MS));
    h.push(format!("N 0 2 1 {} Timeout", 1_100 * MS));
    let r = run(&h);
    assert_eq!(r.stuck_waits, 2, "{}", r.summary());
    assert_eq!(r.not_acquired, 1);
    assert_eq!(r.errors.get("Timeout"), Some(&1));
    assert!(r.max_wait_ms >= 40_000.0);
}

#[test]
fn bad_lines_are_errors() {
    assert!(check(["A 0 0 x 5 - 6"], 1000).is_err());
    assert!(check(["Z 0 0 1 5"], 1000).is_err());
    assert!(check(["", "# comment"], 1000).is_ok());
}
