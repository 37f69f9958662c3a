//! The checker on hand-written histories: an injected unannounced overlap is reported as one,
//! and announced ones, sequential holds and re-entry are not; what the holder learnt only after
//! the later acquisition does not announce it, an acquisition that returned already expired
//! does; a hold that never ended overlaps every later one; overlaps excused only by the deadline
//! are counted apart, and each overlap is tied to the fault that explains its news (a deadline
//! needs one that stalls renewals); a hold told is tied to a fault that can tell it, or counted
//! unexplained; fencing tokens must increase unless a fault lost the counter.

use redisson_lock_chaos::{check, check_with, Excuse, FaultSpan, Faults};

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

fn run_with(lines: &[String], faults: &Faults) -> redisson_lock_chaos::Report {
    check_with(lines.iter().map(String::as_str), 30_000, faults).expect("a valid history")
}

/// A fenced hold of `lock` by `(process, owner, seq)`: attempt begun at `begin` ms, acquired at `acq` ms with `token`
/// (deadline 3 s later), critical section ended at `end` ms.
fn fenced(
    (p, o, seq): (u32, u32, u64),
    lock: &str,
    begin: u64,
    acq: u64,
    token: u64,
    end: u64,
) -> Vec<String> {
    vec![
        format!("B {p} {o} {seq} {} {lock} fenced", begin * MS),
        format!("A {p} {o} {seq} {} {token} {}", acq * MS, (acq + 3000) * MS),
        format!("E {p} {o} {seq} {}", end * MS),
        format!("R {p} {o} {seq} {} ok", (end + 1) * MS),
    ]
}

fn fault(name: &str, start: u64, end: u64, can_overlap: bool, loses_data: bool) -> FaultSpan {
    FaultSpan {
        name: name.to_owned(),
        start: start * MS,
        end: end * MS,
        can_overlap,
        loses_data,
        ..FaultSpan::default()
    }
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

    assert_eq!(r.told, 1, "{}", r.summary());

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
fn what_the_holder_learnt_after_the_later_acquisition_does_not_announce_it() {
    // p0 holds from 100 to 5000 ms (deadline 3000 ms); p1 acquires at 1000 ms. Each case below
    // tells p0 only after that: the overlap stays unannounced.
    let base = {
        let mut h = hold(0, 0, 1, "x", 100, 3000, 5000);
        h.extend(hold(1, 0, 1, "x", 1000, 4000, 1200));
        h
    };
    let late = [
        // `lost()` resolved 100 ms after the other acquired.
        format!("T 0 0 1 {} InDoubt", 1100 * MS),
        // A look that saw the hold in doubt, or lost.
        format!("O 0 0 1 {} InDoubt {}", 1100 * MS, 3000 * MS),
        format!("O 0 0 1 {} Lost {}", 1001 * MS, 3000 * MS),
        // A look that saw a deadline which had passed when it looked, but not at 1000 ms.
        format!("O 0 0 1 {} Held {}", 1100 * MS, 1050 * MS),
    ];
    for line in &late {
        let mut h = base.clone();
        h.push(line.clone());
        let r = run(&h);
        assert_eq!(
            (r.overlaps, r.unannounced, r.deadline_only),
            (1, 1, 0),
            "{line}: {}",
            r.summary()
        );
        assert_eq!(r.overlap_list[0].excuse, Excuse::Unannounced);
    }
    // The same news at the acquisition's very time, or before it, announces it.
    let mut h = base.clone();
    h.push(format!("T 0 0 1 {} InDoubt", 1000 * MS));
    assert_eq!(run(&h).unannounced, 0);
    let mut h = base;
    h.push(format!("O 0 0 1 {} Held {}", 900 * MS, 950 * MS));
    let r = run(&h);
    assert_eq!((r.unannounced, r.deadline_only), (0, 1), "{}", r.summary());
}

#[test]
fn an_acquisition_that_returned_already_past_its_deadline_is_announced() {
    // p1 acquires at 1000 ms and holds a valid lock. p0's acquisition was granted long before
    // and its process stopped before it returned: it returns at 1100 ms with its deadline
    // (900 ms) already passed. Its acquisition comes second in the history although it came
    // first on the server; its holder was told at once (the deadline): announced.
    let mut h = hold(1, 0, 1, "x", 1000, 4000, 2000);
    h.extend(hold(0, 0, 1, "x", 1100, 900, 1500));
    let r = run(&h);
    assert_eq!(
        (r.overlaps, r.unannounced, r.deadline_only),
        (1, 0, 1),
        "{}",
        r.summary()
    );
    // Returned in doubt: told by its state.
    let mut h = hold(1, 0, 1, "x", 1000, 4000, 2000);
    h.extend(hold(0, 0, 1, "x", 1100, 3900, 1500));
    h[5].push_str(" InDoubt");
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced), (1, 0), "{}", r.summary());
    assert_eq!(r.overlap_list[0].excuse, Excuse::Told);
    // Returned valid: unannounced.
    let mut h = hold(1, 0, 1, "x", 1000, 4000, 2000);
    h.extend(hold(0, 0, 1, "x", 1100, 3900, 1500));
    assert_eq!(run(&h).unannounced, 1);
}

#[test]
fn a_hold_that_never_ended_overlaps_every_later_hold() {
    // p0 acquired at 100 ms (deadline 3000 ms) and never ended its critical section nor
    // released (its process died): it lasts to the end of the history.
    let mut h = vec![
        format!("B 0 0 1 {} x reentrant", 99 * MS),
        format!("A 0 0 1 {} - {}", 100 * MS, 3000 * MS),
    ];
    h.extend(hold(1, 0, 1, "x", 1000, 4000, 1200));
    h.extend(hold(1, 0, 2, "x", 3500, 6500, 3600));
    h.extend(hold(2, 0, 1, "x", 9000, 12000, 9100));
    let r = run(&h);
    assert_eq!(r.ops, 4);
    // p1's first hold while p0's was valid: unannounced; the two after p0's deadline: only
    // the deadline announced them.
    assert_eq!(
        (r.overlaps, r.unannounced, r.deadline_only),
        (3, 1, 2),
        "{}",
        r.summary()
    );
    assert!(r.examples[0].contains("ended None"), "{}", r.examples[0]);
}

#[test]
fn overlaps_announced_only_by_the_deadline_are_counted_apart() {
    // Told by the state (in doubt at 900 ms) and past the deadline too: told, not deadline.
    let mut h = hold(0, 0, 1, "x", 100, 800, 5000);
    h.push(format!("T 0 0 1 {} InDoubt", 900 * MS));
    h.extend(hold(1, 0, 1, "x", 1000, 4000, 1200));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced, r.deadline_only), (1, 0, 0));
    assert_eq!(r.overlap_list[0].excuse, Excuse::Told);
    // Only the deadline (800 ms) had passed: counted apart.
    let mut h = hold(0, 0, 1, "x", 100, 800, 5000);
    h.extend(hold(1, 0, 1, "x", 1000, 4000, 1200));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced, r.deadline_only), (1, 0, 1));
    assert_eq!(r.overlap_list[0].excuse, Excuse::Deadline);
}

#[test]
fn each_overlap_is_tied_to_the_fault_that_explains_its_news() {
    // A pause (it stalls renewals) from 500 to 2000 ms, then latency (it cannot make holds
    // overlap) from 2500 to 4000 ms; the news of a fault can reach a holder up to 1 s after
    // its end (the told window).
    let faults = Faults {
        spans: vec![
            fault("pause-client", 500, 2000, true, false),
            FaultSpan {
                stalls: false,
                ..fault("latency", 2500, 4000, false, false)
            },
        ],
        window_ns: 1000 * MS,
        told_window_ns: 1000 * MS,
        ..Faults::default()
    };
    // Overlaps announced only by the earlier holder's deadline, each on a lock of its own:
    // (deadline, later acquisition) in ms. The deadline must have passed while a fault that
    // stalls renewals was under way, or within the told window after it.
    let cases = [
        (150u64, 200u64), // before any fault
        (300, 1500),      // passed before the pause began: nothing stalled its renewals
        (1000, 1500),     // during the pause
        (2800, 2900),     // 800 ms after the pause
        (3500, 3600),     // 1500 ms after the pause, during latency
    ];
    let mut h = Vec::new();
    for (i, (deadline, at)) in cases.into_iter().enumerate() {
        let lock = format!("l{i}");
        h.extend(hold(0, 0, i as u64 + 1, &lock, 100, deadline, 5000));
        h.extend(hold(1, 0, i as u64 + 1, &lock, at, at + 3000, at + 10));
    }
    let r = run_with(&h, &faults);
    assert_eq!((r.overlaps, r.deadline_only), (5, 5), "{}", r.summary());
    let tied: Vec<(u64, Option<usize>, bool)> = r
        .overlap_list
        .iter()
        .map(|o| (o.at / MS, o.fault, o.explained))
        .collect();
    assert_eq!(
        tied,
        vec![
            (200, None, false),
            (1500, Some(0), false),
            (1500, Some(0), true),
            (2900, Some(0), true),
            (3600, Some(1), false),
        ]
    );
    assert_eq!(r.unexplained, 3, "{}", r.summary());
    assert_eq!(
        r.by_fault()
            .iter()
            .map(|e| (e.fault.as_str(), e.all, e.unexplained))
            .collect::<Vec<_>>(),
        vec![("-", 1, 1), ("pause-client", 3, 1), ("latency", 1, 1)]
    );
    // A fault that cannot stall renewals does not explain a deadline passed during it: the
    // same pause, marked so, explains none of them.
    let no_stall = Faults {
        spans: vec![FaultSpan {
            stalls: false,
            ..faults.spans[0].clone()
        }],
        ..faults.clone()
    };
    assert_eq!(run_with(&h, &no_stall).unexplained, 5);
    // Without faults, every overlap is unexplained.
    assert_eq!(run(&h).unexplained, 5);

    // Overlaps announced by the earlier holder's state are tied to when it was told: told at
    // 1800 ms (during the pause), overlapped at 3500 ms, long after the pause: explained; told
    // at 3200 ms (1200 ms after the pause), overlapped at 3300 ms: unexplained.
    let mut h = hold(0, 0, 1, "a", 100, 9000, 5000);
    h.push(format!("T 0 0 1 {} InDoubt", 1800 * MS));
    h.extend(hold(1, 0, 1, "a", 3500, 6500, 3600));
    h.extend(hold(0, 0, 2, "b", 100, 9000, 5000));
    h.push(format!("T 0 0 2 {} Lost", 3200 * MS));
    h.extend(hold(1, 0, 2, "b", 3300, 6300, 3400));
    let r = run_with(&h, &faults);
    let tied: Vec<(u64, bool)> = r
        .overlap_list
        .iter()
        .map(|o| (o.at / MS, o.explained))
        .collect();
    assert_eq!(tied, vec![(3300, false), (3500, true)], "{}", r.summary());
    // In doubt since a restart from the AOF (it cannot make holds overlap) at 1000 ms, still in
    // doubt when the data is lost at 1500 ms, overlapped at 2000 ms: explained by the loss.
    let restarts = Faults {
        spans: vec![
            fault("kill-persist", 900, 1100, false, false),
            fault("kill-wipe", 1500, 1600, true, true),
        ],
        ..faults.clone()
    };
    let mut h = hold(0, 0, 1, "a", 100, 9000, 5000);
    h.push(format!("T 0 0 1 {} InDoubt", 1000 * MS));
    h.extend(hold(1, 0, 1, "a", 2000, 5000, 2100));
    let r = run_with(&h, &restarts);
    assert_eq!(
        (r.overlap_list[0].fault, r.overlap_list[0].explained),
        (Some(1), true)
    );
    // Without the loss, the restart alone explains nothing.
    let r = run_with(
        &h,
        &Faults {
            spans: restarts.spans[..1].to_vec(),
            ..faults.clone()
        },
    );
    assert_eq!(r.unexplained, 1);
    // A run of news: in doubt at 1800 ms, held again at 1900 ms, lost at 3200 ms: the news of
    // the overlap is the last run's (3200 ms), which no fault explains.
    let mut h = hold(0, 0, 1, "a", 100, 9000, 5000);
    h.push(format!("O 0 0 1 {} InDoubt {}", 1800 * MS, 9000 * MS));
    h.push(format!("O 0 0 1 {} Held {}", 1900 * MS, 9000 * MS));
    h.push(format!("O 0 0 1 {} Lost {}", 3200 * MS, 9000 * MS));
    h.extend(hold(1, 0, 1, "a", 3500, 6500, 3600));
    assert_eq!(run_with(&h, &faults).unexplained, 1);
}

#[test]
fn a_hold_told_is_tied_to_a_fault_that_can_tell_it() {
    // Holds told in doubt at 1200 ms (p0) and at 3000 ms (p1), a hold of p0 that came back
    // from its acquisition (begun at 1999 ms, returned at 2500 ms) in doubt, and one never
    // told.
    let mut h = hold(0, 0, 1, "x", 100, 9000, 5000);
    h.push(format!("T 0 0 1 {} InDoubt", 1200 * MS));
    h.extend(hold(1, 0, 1, "y", 100, 9000, 5000));
    h.push(format!("O 1 0 1 {} InDoubt {}", 3000 * MS, 9000 * MS));
    let mut born = hold(0, 1, 1, "z", 2500, 9000, 5000);
    born[0] = format!("B 0 1 1 {} z reentrant", 1999 * MS);
    born[1] = format!("A 0 1 1 {} - {} InDoubt", 2500 * MS, 9000 * MS);
    h.extend(born);
    h.extend(hold(1, 1, 1, "w", 100, 9000, 5000));
    let told = |faults: &Faults| {
        let r = run_with(&h, faults);
        (r.told, r.told_unexplained)
    };
    // Without faults, every hold told is unexplained.
    assert_eq!(told(&Faults::default()), (3, 3));
    let window = |spans: Vec<FaultSpan>| Faults {
        spans,
        told_window_ns: 1000 * MS,
        ..Faults::default()
    };
    // A partition from 1000 to 1500 ms explains the first and the third (its acquisition was
    // under way within the told window after it); not the second, 1500 ms after its end.
    let partition = fault("partition", 1000, 1500, true, false);
    assert_eq!(told(&window(vec![partition.clone()])), (3, 1));
    // A pause of p1 explains only p1's; a RedLock node's restart tells no holder of the
    // deployment; a deletion of "x" only the holder of "x".
    let pause = |p: u32| FaultSpan {
        process: Some(p),
        ..fault("pause-client", 1000, 2900, true, false)
    };
    assert_eq!(told(&window(vec![pause(1)])), (3, 2));
    assert_eq!(told(&window(vec![pause(0)])), (3, 1));
    let redlock = FaultSpan {
        tells: false,
        ..partition.clone()
    };
    assert_eq!(told(&window(vec![redlock])), (3, 3));
    let del = |lock: &str| FaultSpan {
        lock: Some(lock.to_owned()),
        deletes: true,
        ..partition.clone()
    };
    assert_eq!(told(&window(vec![del("x")])), (3, 2));
    assert_eq!(told(&window(vec![del("w")])), (3, 3));
    // The summary names them.
    let r = run(&h);
    assert!(
        r.summary().contains("told=3 told_unexplained=3 "),
        "{}",
        r.summary()
    );
    assert!(
        r.summary().contains("told, no fault explains it: lock x"),
        "{}",
        r.summary()
    );
}

#[test]
fn fencing_tokens_must_increase_while_the_counter_survives() {
    // Sequential holds of "f": tokens 5, 8, 10 (failed attempts between them took some).
    let mut h = fenced((0, 0, 1), "f", 90, 100, 5, 500);
    h.extend(fenced((1, 0, 1), "f", 600, 700, 8, 800));
    h.extend(fenced((0, 0, 2), "f", 900, 1000, 10, 1100));
    let r = run(&h);
    assert_eq!((r.ops, r.token_regressions, r.duplicate_tokens), (3, 0, 0));

    // A hold that began after the one with token 10 was acquired gets 4: a regression, and so
    // is one that gets 10 again (a duplicate too).
    let mut back = h.clone();
    back.extend(fenced((1, 0, 2), "f", 1200, 1300, 4, 1400));
    let r = run(&back);
    assert_eq!(r.token_regressions, 1, "{}", r.summary());
    let mut again = h.clone();
    again.extend(fenced((1, 0, 2), "f", 1200, 1300, 10, 1400));
    let r = run(&again);
    assert_eq!(
        (r.token_regressions, r.duplicate_tokens),
        (1, 1),
        "{}",
        r.summary()
    );

    // A fault that lost the data between them excuses both (the counter started again).
    let lost = Faults {
        spans: vec![fault("kill-wipe", 1150, 1160, true, true)],
        window_ns: 0,
        ..Faults::default()
    };
    assert_eq!(run_with(&back, &lost).token_regressions, 0);
    let r = run_with(&again, &lost);
    assert_eq!((r.token_regressions, r.duplicate_tokens), (0, 1));
    // One that cannot lose data does not.
    let kept = Faults {
        spans: vec![fault("kill-persist", 1150, 1160, false, false)],
        window_ns: 0,
        ..Faults::default()
    };
    assert_eq!(run_with(&back, &kept).token_regressions, 1);
    // Nor does a data loss before both holds.
    let before = Faults {
        spans: vec![fault("kill-wipe", 10, 20, true, true)],
        window_ns: 0,
        ..Faults::default()
    };
    assert_eq!(run_with(&back, &before).token_regressions, 1);

    // A token below 10 (above 8) for an attempt that began before the acquisition of 10
    // returned: the order is unknown (the server may have granted 9 first), no regression; an
    // equal token is one in any order.
    let mut unknown = h.clone();
    unknown.extend(fenced((1, 0, 2), "f", 950, 1300, 9, 1400));
    assert_eq!(run(&unknown).token_regressions, 0);
    let mut unknown = h;
    unknown.extend(fenced((1, 0, 2), "f", 950, 1300, 10, 1400));
    assert_eq!(run(&unknown).token_regressions, 1);
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
    assert_eq!((r.overlaps, r.told), (0, 0), "{}", r.summary());
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

/// A hold like [`hold`] with options on its `B` line (`lease=`, `side=`, `units=`).
#[allow(clippy::too_many_arguments)]
fn hold_with(
    p: u32,
    o: u32,
    seq: u64,
    lock: &str,
    opts: &str,
    acq: u64,
    deadline: u64,
    end: u64,
) -> Vec<String> {
    let mut h = hold(p, o, seq, lock, acq, deadline, end);
    h[0] = format!("B {p} {o} {seq} {} {lock} reentrant {opts}", (acq - 1) * MS);
    h
}

#[test]
fn readers_overlap_only_writers() {
    // Two readers of "rw" (p0 and p1) at once: no overlap. A writer (p2) acquiring while p1
    // reads: one overlap; a reader (p3) while the writer writes: another.
    let mut h = hold_with(0, 0, 1, "rw", "units=rw@r", 100, 3000, 2000);
    h.extend(hold_with(1, 0, 1, "rw", "units=rw@r", 200, 3000, 2000));
    let r = run(&h);
    assert_eq!((r.ops, r.overlaps), (2, 0), "{}", r.summary());
    h.extend(hold_with(2, 0, 1, "rw", "", 1000, 4000, 3000));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced), (2, 2), "{}", r.summary());
    h.extend(hold_with(3, 0, 1, "rw", "units=rw@r", 2500, 5000, 2600));
    let r = run(&h);
    assert_eq!(r.overlaps, 3, "{}", r.summary());
    // The writer's hold overlapped both readers that were still reading: p0 and p1.
    assert!(
        r.examples.iter().any(|e| e.contains("p0/o0/#1")),
        "{:?}",
        r.examples
    );
}

#[test]
fn group_holds_overlap_when_their_values_intersect() {
    let g = |p: u32, values: &str, acq: u64, end: u64| {
        let units: Vec<String> = values.split(',').map(|v| format!("g/{v}")).collect();
        hold_with(
            p,
            0,
            1,
            "g",
            &format!("units={}", units.join(",")),
            acq,
            acq + 3000,
            end,
        )
    };
    // {a,b} and {c}: disjoint, no overlap; {b,c} meets both, and counts once per pair although
    // it shares one value with each.
    let mut h = g(0, "a,b", 100, 2000);
    h.extend(g(1, "c", 200, 2000));
    assert_eq!(run(&h).overlaps, 0);
    h.extend(g(2, "b,c", 300, 400));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced), (2, 2), "{}", r.summary());
    // Two holds sharing two values are still one overlap.
    let mut h = g(0, "a,b", 100, 2000);
    h.extend(g(1, "b,a", 200, 300));
    assert_eq!(run(&h).overlaps, 1);
}

#[test]
fn a_multi_lock_holds_each_of_its_parts() {
    // A multi-lock over m1 and m2, and plain holds of m2 and then m3.
    let mut h = hold_with(0, 0, 1, "m1+m2", "units=m1,m2", 100, 3000, 2000);
    h.extend(hold(1, 0, 1, "m3", 200, 3000, 300));
    assert_eq!(run(&h).overlaps, 0);
    h.extend(hold(2, 0, 1, "m2", 400, 3000, 500));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced), (1, 1), "{}", r.summary());
    assert!(r.examples[0].contains("lock m2 "), "{}", r.examples[0]);
}

#[test]
fn java_holders_are_counted_per_side() {
    // A Java holder (watchdog: no deadline) of "x" from 100 ms, and a crate holder acquires "x"
    // at 1000 ms; a crate holder of "y" from 8000 ms (deadline 11 000 ms), and a Java holder
    // acquires "y" at 9000 ms.
    let java = |p: u32, lock: &str, acq: u64, end: u64| {
        let mut h = hold_with(p, 0, 1, lock, "side=java", acq, 0, end);
        h[1] = format!("A {p} 0 1 {} - {}", acq * MS, u64::MAX);
        h
    };
    let mut h = java(0, "x", 100, 5000);
    h.extend(hold(1, 0, 1, "x", 1000, 4000, 1200));
    h.extend(hold(1, 0, 2, "y", 8000, 11000, 9500));
    h.extend(java(2, "y", 9000, 9100));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced), (2, 2), "{}", r.summary());
    assert_eq!(r.by_side["java>crate"].all, 1);
    assert_eq!(r.by_side["crate>java"].unannounced, 1);
    // The crate holder was not told: a crate defect. The Java holder overlapped by the crate
    // with no fault before it: the crate broke its exclusion.
    assert_eq!(
        (r.unannounced_crate, r.java_broken),
        (1, 1),
        "{}",
        r.summary()
    );
    assert_eq!(r.ops_by_side["java"], 2);

    // A pause of the Java process 0 (its renewals stopped) explains the first; a pause of
    // process 1 does not (the Java holder was running).
    let pause = |p: u32| Faults {
        spans: vec![FaultSpan {
            process: Some(p),
            ..fault("pause-client", 500, 900, true, false)
        }],
        window_ns: 1000 * MS,
        ..Faults::default()
    };
    assert_eq!(run_with(&h, &pause(0)).java_broken, 0);
    assert_eq!(run_with(&h, &pause(1)).java_broken, 1);
    // A Java leased hold is announced by its lease: its holder's code knows when it ends.
    let mut h = hold_with(0, 0, 1, "x", "side=java lease=500", 100, 600, 5000);
    h.extend(hold(1, 0, 1, "x", 1000, 4000, 1200));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced, r.deadline_only), (1, 0, 1));
}

#[test]
fn a_pause_explains_the_overlaps_of_its_process_only() {
    // p0's hold overlapped by p1 at 1500 ms; p2 was paused, not p0.
    let mut h = hold(0, 0, 1, "x", 100, 1000, 5000);
    h.extend(hold(1, 0, 1, "x", 1500, 4500, 1600));
    let faults = |p: u32| Faults {
        spans: vec![FaultSpan {
            process: Some(p),
            ..fault("pause-client", 500, 1400, true, false)
        }],
        window_ns: 1000 * MS,
        ..Faults::default()
    };
    assert_eq!(run_with(&h, &faults(0)).unexplained, 0);
    assert_eq!(run_with(&h, &faults(2)).unexplained, 1);
    // The later holder's pause explains it only if its acquisition told it (it returned past
    // its deadline: granted before the pause).
    assert_eq!(run_with(&h, &faults(1)).unexplained, 1);
    let mut late = hold(0, 0, 1, "x", 100, 3000, 5000);
    late.extend(hold(1, 0, 1, "x", 1500, 1400, 1600));
    assert_eq!(run_with(&late, &faults(1)).unexplained, 0);
}

#[test]
fn a_deleted_key_excuses_its_holder_only_within_the_window() {
    let del = |lock: &str| Faults {
        spans: vec![FaultSpan {
            lock: Some(lock.to_owned()),
            deletes: true,
            ..fault("del-key", 1000, 1010, true, false)
        }],
        window_ns: 5000 * MS,
        deletion_window_ns: 3000 * MS,
        ..Faults::default()
    };
    // p0 holds "x" (watchdog; its renewals found nothing wrong: deadline 9000 ms); the key is
    // deleted at 1000 ms; p1 acquires at 2000 ms: in the window, not a crate defect.
    let base = hold(0, 0, 1, "x", 100, 9000, 8000);
    let mut h = base.clone();
    h.extend(hold(1, 0, 1, "x", 2000, 5000, 2100));
    let r = run_with(&h, &del("x"));
    assert_eq!(
        (
            r.overlaps,
            r.unannounced,
            r.in_deletion_window,
            r.unannounced_crate
        ),
        (1, 1, 1, 0),
        "{}",
        r.summary()
    );
    assert_eq!(r.overlap_list[0].excuse, Excuse::Deleted);
    assert_eq!(r.unexplained, 0);
    // Another key deleted: no excuse, and unexplained.
    let r = run_with(&h, &del("y"));
    assert_eq!(
        (r.unannounced_crate, r.unexplained),
        (1, 1),
        "{}",
        r.summary()
    );
    // At 5000 ms, past the window, still held and renewed (deadline 9000 ms): a defect.
    let mut h = base.clone();
    h.extend(hold(1, 0, 1, "x", 5000, 8000, 5100));
    let r = run_with(&h, &del("x"));
    assert_eq!(
        (r.in_deletion_window, r.unannounced_crate),
        (0, 1),
        "{}",
        r.summary()
    );
    // The owner acquired "x" again (a nested re-entry) at 1500 ms: from then on it knew.
    let mut h = base.clone();
    h.extend(hold(0, 0, 2, "x", 1500, 4500, 1600));
    h.extend(hold(1, 0, 1, "x", 2000, 5000, 2100));
    let r = run_with(&h, &del("x"));
    assert_eq!(
        (r.in_deletion_window, r.unannounced_crate),
        (0, 1),
        "{}",
        r.summary()
    );
    // A hold whose acquisition returned while the deletion was under way (the script ran at
    // some time in it) is excused as well, and so is one whose attempt began before the
    // deletion ended and returned after it (its grant may have come first: a replica sync's
    // `WAIT` follows the grant).
    let mut h = hold(0, 0, 1, "x", 1005, 9000, 8000);
    h.extend(hold(1, 0, 1, "x", 2000, 5000, 2100));
    assert_eq!(run_with(&h, &del("x")).in_deletion_window, 1);
    let mut h = hold(0, 0, 1, "x", 1100, 9000, 8000);
    h[0] = format!("B 0 0 1 {} x reentrant", 1009 * MS);
    h.extend(hold(1, 0, 1, "x", 2000, 5000, 2100));
    assert_eq!(run_with(&h, &del("x")).in_deletion_window, 1);
    // A leased hold is not checked before its lease ends: excused until then, at 5000 ms too.
    let mut h = hold_with(0, 0, 1, "x", "lease=9000", 100, 9000, 8000);
    h.extend(hold(1, 0, 1, "x", 5000, 8000, 5100));
    let r = run_with(&h, &del("x"));
    assert_eq!(
        (r.in_deletion_window, r.unannounced_crate),
        (1, 0),
        "{}",
        r.summary()
    );
    // A hold whose attempt began after the deletion is not excused by it.
    let mut h = hold(0, 0, 1, "x", 1100, 9000, 8000);
    h.extend(hold(1, 0, 1, "x", 2000, 5000, 2100));
    assert_eq!(run_with(&h, &del("x")).unannounced_crate, 1);
}

#[test]
fn leased_holds_told_at_their_end_are_not_told_early() {
    // Told lost at its lease's end (3000 ms): by design. Told in doubt at 1000 ms: counted.
    let mut h = hold_with(0, 0, 1, "x", "lease=2900", 100, 3000, 3500);
    h.push(format!("T 0 0 1 {} Lost", 3010 * MS));
    assert_eq!(run(&h).told, 0);
    h.push(format!("O 0 0 1 {} InDoubt {}", 1000 * MS, 3000 * MS));
    assert_eq!(run(&h).told, 1);
}

#[test]
fn a_doubt_that_lasts_to_the_deadline_is_counted() {
    // In doubt at 1000 ms, held again at 1100 ms: not counted.
    let mut h = hold(0, 0, 1, "x", 100, 3000, 5000);
    h.push(format!("O 0 0 1 {} InDoubt {}", 1000 * MS, 3000 * MS));
    h.push(format!("O 0 0 1 {} Held {}", 1100 * MS, 4000 * MS));
    assert_eq!(run(&h).doubt_to_deadline, 0);
    // Found lost at 1200 ms, long before its deadline: not counted (the crate found out).
    let mut h = hold(0, 0, 1, "x", 100, 3000, 5000);
    h.push(format!("O 0 0 1 {} InDoubt {}", 1000 * MS, 3000 * MS));
    h.push(format!("O 0 0 1 {} Lost {}", 1200 * MS, 3000 * MS));
    assert_eq!(run(&h).doubt_to_deadline, 0);
    // In doubt until it was lost at its deadline, or until it ended past it: counted.
    let mut h = hold(0, 0, 1, "x", 100, 3000, 5000);
    h.push(format!("O 0 0 1 {} InDoubt {}", 1000 * MS, 3000 * MS));
    h.push(format!("O 0 0 1 {} Lost {}", 3020 * MS, 3000 * MS));
    let r = run(&h);
    assert_eq!(r.doubt_to_deadline, 1, "{}", r.summary());
    let mut h = hold(0, 0, 1, "x", 100, 3000, 3100);
    h.push(format!("O 0 0 1 {} InDoubt {}", 1000 * MS, 3000 * MS));
    assert_eq!(run(&h).doubt_to_deadline, 1);
}

#[test]
fn bad_options_are_errors() {
    assert!(check(["B 0 0 1 5 x reentrant lease=abc"], 1000).is_err());
    assert!(check(["B 0 0 1 5 x reentrant what=1"], 1000).is_err());
    assert!(check(["B 0 0 1 5 x reentrant units=,a"], 1000).is_err());
    assert!(check(
        ["B 0 0 1 5 x reentrant units=x/a@r,y side=java lease=5"],
        1000
    )
    .is_ok());
}

#[test]
fn crate_acquisitions_are_counted_by_kind_with_the_told_ones_and_long_by_how_long_they_lasted() {
    // A watchdog hold (told in doubt), a leased one and a nested inner acquisition of the same
    // owner inside it, a reader, and a Java holder, which is not the crate's.
    let mut h = hold(0, 0, 1, "x", 100, 3000, 500);
    h.push(format!("O 0 0 1 {} InDoubt {}", 300 * MS, 3000 * MS));
    h.extend(hold_with(0, 0, 2, "y", "lease=4000", 1000, 5000, 3000));
    h.extend(hold_with(
        0,
        0,
        3,
        "y",
        "lease=4000 nested=1",
        1500,
        5500,
        1600,
    ));
    let mut reader = hold_with(0, 1, 1, "z", "units=z@r", 100, 3000, 200);
    reader[0] = format!("B 0 1 1 {} z read units=z@r", 99 * MS);
    h.extend(reader);
    h.extend(hold_with(1, 0, 1, "w", "side=java", 100, 3000, 200));
    // A watchdog hold whose work was to last several leases (`long=1`), told lost at its
    // first deadline and ended then: it did not last (not `long`).
    h.extend(hold_with(0, 2, 1, "v", "long=1", 100, 3000, 3100));
    h.push(format!("T 0 2 1 {} Lost", 3000 * MS));
    // A watchdog hold without the flag that lasted 2.1 leases (a first window of 1 s): it
    // lived by its renewals (`long`), told nothing.
    h.extend(hold(0, 3, 1, "u", 100, 1100, 2200));
    // A leased hold that lasted 3 of its windows lived by its lease, not by renewals.
    h.extend(hold_with(
        0,
        4,
        1,
        "t",
        "lease=1000 long=1",
        100,
        1100,
        3100,
    ));
    let r = run(&h);
    let kinds: Vec<(&str, (u64, u64))> = r.by_kind.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    assert_eq!(
        kinds,
        [
            ("leased", (3, 0)),
            ("long", (1, 0)),
            ("nested", (1, 0)),
            ("read", (1, 0)),
            ("reentrant", (6, 2)),
        ],
        "{}",
        r.summary()
    );
    assert!(
        r.summary().contains(
            "crate_ops_by_kind(acquired/told)=leased:3/0,long:1/0,nested:1/0,read:1/0,\
             reentrant:6/2"
        ),
        "{}",
        r.summary()
    );
    assert!(check(["B 0 0 1 5 x reentrant nested=1 lease=5"], 1000).is_ok());
}

/// A run of the run-once job of `name` by `(process, owner, seq)`, as the worker writes it:
/// attempt begun at `begin` ms (`at_least` 1 s), the job started at `start` ms (no deadline:
/// the job is told only its state), an optional look `(at ms, state)`, the job ended at `end`.
fn once_run(
    (p, o, seq): (u32, u32, u64),
    name: &str,
    begin: u64,
    start: u64,
    look: Option<(u64, &str)>,
    end: u64,
) -> Vec<String> {
    let mut v = vec![
        format!(
            "B {p} {o} {seq} {} {name} run-once at_least=1000",
            begin * MS
        ),
        format!("A {p} {o} {seq} {} - {} Held", start * MS, u64::MAX),
    ];
    if let Some((at, state)) = look {
        v.push(format!("O {p} {o} {seq} {} {state} {}", at * MS, u64::MAX));
    }
    v.push(format!("E {p} {o} {seq} {}", end * MS));
    v.push(format!("R {p} {o} {seq} {} ok", (end + 1) * MS));
    v
}

#[test]
fn two_runs_of_one_tick_at_once_unannounced_are_counted() {
    // p0 runs tick 7 from 100 to 900 ms, never told; p1 runs it too from 500 ms.
    let mut h = once_run((0, 0, 1), "chaos-once-7", 99, 100, Some((300, "Held")), 900);
    h.extend(once_run((1, 0, 1), "chaos-once-7", 499, 500, None, 600));
    let r = run(&h);
    assert_eq!(r.ops, 2);
    assert_eq!(
        (r.overlaps, r.unannounced, r.unannounced_crate),
        (1, 1, 1),
        "{}",
        r.summary()
    );
    assert_eq!(r.by_variant.get("run-once"), Some(&(1, 1)));
    assert_eq!(r.by_kind.get("run-once"), Some(&(2, 0)));
    assert!(r.examples[0].contains("p0/o0/#1"), "{}", r.examples[0]);
    // Runs at once are overlaps, not reruns.
    assert_eq!((r.once_reruns, r.once_early_reruns), (0, 0));
    assert!(r.summary().contains("once_reruns(all/early)=0/0"));
}

#[test]
fn two_runs_of_one_tick_at_once_announced_are_excused() {
    // The same, but p0's hold went in doubt at 300 ms, before p1's run started.
    let mut h = once_run(
        (0, 0, 1),
        "chaos-once-7",
        99,
        100,
        Some((300, "InDoubt")),
        900,
    );
    h.extend(once_run((1, 0, 1), "chaos-once-7", 499, 500, None, 600));
    let r = run(&h);
    assert_eq!(
        (r.overlaps, r.unannounced, r.unannounced_crate),
        (1, 0, 0),
        "{}",
        r.summary()
    );
    // In doubt only after p1 started: it did not announce it.
    let mut h = once_run((0, 0, 1), "chaos-once-7", 99, 100, Some((550, "Lost")), 900);
    h.extend(once_run((1, 0, 1), "chaos-once-7", 499, 500, None, 600));
    assert_eq!(run(&h).unannounced_crate, 1);
}

#[test]
fn a_second_run_of_a_tick_after_the_first_ended_is_a_rerun_not_an_overlap() {
    // p0 runs tick 7 from 100 to 200 ms (its name kept until 1099 ms by `at_least`); p1 runs
    // it at 500 ms (early: the name should still have been held), p2 at 1500 ms (after it).
    let mut h = once_run((0, 0, 1), "chaos-once-7", 99, 100, None, 200);
    h.extend(once_run((1, 0, 1), "chaos-once-7", 499, 500, None, 600));
    h.extend(once_run((2, 0, 1), "chaos-once-7", 1499, 1500, None, 1600));
    // Another tick's run at once with p0's is no rerun and no overlap.
    h.extend(once_run((3, 0, 1), "chaos-once-8", 149, 150, None, 160));
    let r = run(&h);
    assert_eq!((r.overlaps, r.unannounced), (0, 0), "{}", r.summary());
    assert_eq!(
        (r.once_reruns, r.once_early_reruns),
        (2, 1),
        "{}",
        r.summary()
    );
}

#[test]
fn a_report_sums_the_holds_of_each_process_over_its_owners() {
    let mut r = redisson_lock_chaos::Report::default();
    r.owner_ops.insert((0, 1), 5);
    r.owner_ops.insert((0, 2), 7);
    r.owner_ops.insert((2, 1), 1);
    let per: Vec<(u32, u64)> = r.process_ops().into_iter().collect();
    assert_eq!(per, vec![(0, 12), (2, 1)]);
}
