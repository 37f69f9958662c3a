//! The `fairness` section: two processes with 3 owners each on one hot lock, beside real Java.
//!
//! **A run** (`peer::hot_lock`): each of the 6 owners loops `BENCH_FAIR_ROUNDS` (40) times on
//! one lock name of its own for the run: lock, hold for the hold time (`sleep`), unlock, with no
//! pause between an unlock and the next lock, as a Java thread looping over `lock(); try { work
//! } finally { unlock(); }`. Every owner of side A gets its commands first (the start order),
//! then every owner of side B, in one write each. The run ends when every owner is done.
//!
//! **What is read from it** (`compat_tests::fairness`, shared with the test
//! `java_gets_a_fair_share_of_a_hot_lock_beside_the_crate`; times are the peers' reply stamps):
//! * the holds **while both wait**: from the first hold to the last one taken while both sides
//!   still had rounds to go; each side's count, and the **smaller side's share** of them;
//! * each side's **longest wait**, in **holds waited**: for one acquisition of one owner, the
//!   holds (of either side) that began between that owner's previous release (or the start of
//!   the run) and its acquisition; a side's longest wait is the most any of its owners waited
//!   for one acquisition. For a Java owner that is how many times the lock changed hands while
//!   it sat in `lock()`; Java's worst case beside the crate is compared with Java's worst case
//!   beside another Java process in the same section (the reference), in the same unit;
//! * each side's **longest run** (holds in a row) and the order of the holds (`A`/`B`).
//!
//! **The pairs**, with holds of 50 and 100 ms (`BENCH_FAIR_HOLDS`): crate beside crate (two
//! `lock-peer`s); then for each Redisson version at hand (`REDISSON_CLASSPATH`,
//! `REDISSON_CLASSPATH_ALT`): Java beside Java (two JVMs: the reference), Java's commands
//! first beside the crate, the crate's first beside Java. `BENCH_FAIR_RUNS` (5) runs of each,
//! the pairs taking turns within each run (so the machine's drift hits them alike), after one
//! uncounted warm-up run of each pair (5 rounds of 20 ms: the JVMs' JIT, the connections).
//! Printed: every run, then each pair's runs together (median, smallest and largest), then a
//! ready-to-paste table with the goals (30: the smaller side's share ≥ 0.40 median and
//! ≥ 0.35 in every run; Java's longest wait ≤ 1.25× its longest beside Java; crate beside crate
//! ≥ 0.40). The processes live for the whole section (a JVM takes a second to start).
//!
//! **The fleets** (issue 39), after the pairs, same holds and runs: 2 crate + 1 Java, 3 + 1,
//! 2 + 2 and 1 + 2 processes for each Redisson version, the all-Java fleets of 3 and 4
//! processes of that version as references, and the all-crate fleets of 3 and 4; 3 owners per
//! process, `BENCH_FAIR_ROUNDS` rounds each (`fleet_on_hot_lock`; the Java processes of a
//! version take turns being first). Read from each run: every process's share of the holds
//! while all wait, and each process's longest wait in holds. Printed per fleet: each process's
//! share (median over the runs, smallest–largest), and for each Java process of a mixed fleet
//! its longest wait ÷ the longest wait of any process in the all-Java fleet of the same size
//! in the same run (median over the runs). The goals (issue 39): every process of a mixed
//! fleet ≥ 0.6 / P (P processes) median, every run within 20 % of it; that ratio ≤ 1.25×;
//! every process of an all-crate fleet ≥ 0.6 / P. `BENCH_FAIR_PAIRS=0` skips the pairs,
//! `BENCH_FAIR_FLEETS=0` the fleets.

use std::{process::Command, time::Duration};

use compat_tests::{
    fairness::{Fairness, FleetShares},
    java::version_of,
};

use crate::{env_or, javas, jvm_options, load, lock_peer, median, peer, server_url, spread};

/// Owners per side.
const OWNERS: usize = 3;

/// Who a side is: an index into the section's processes.
#[derive(Clone, Copy)]
enum Kind {
    CrateCrate,
    /// Java beside Java, version `v` (index into the versions).
    JavaJava(usize),
    JavaFirst(usize),
    CrateFirst(usize),
}

struct Pair {
    kind: Kind,
    label: String,
    /// Processes of side A and side B.
    a: usize,
    b: usize,
}

impl Pair {
    /// The Java side of a pair with the crate.
    fn java_side(&self) -> Option<usize> {
        match self.kind {
            Kind::JavaFirst(_) => Some(0),
            Kind::CrateFirst(_) => Some(1),
            _ => None,
        }
    }
}

/// Two distinct elements of `v`, mutably.
fn two<T>(v: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    assert_ne!(a, b);
    if a < b {
        let (l, r) = v.split_at_mut(b);
        (&mut l[a], &mut r[0])
    } else {
        let (l, r) = v.split_at_mut(a);
        (&mut r[0], &mut l[b])
    }
}

/// The section (see the module doc).
pub async fn figures() {
    tokio::task::block_in_place(run_section);
}

fn run_section() {
    println!();
    println!("== fairness: 3 + 3 owners on one hot lock, beside real Java ==");
    let Some(exe) = lock_peer() else {
        println!("fairness section skipped: no lock-peer");
        return;
    };
    let (_server, url) = server_url();
    let runs = env_or("BENCH_FAIR_RUNS", 5usize).max(1);
    let rounds = env_or("BENCH_FAIR_ROUNDS", 40usize).max(2);
    let holds: Vec<u64> = std::env::var("BENCH_FAIR_HOLDS")
        .unwrap_or_else(|_| "50,100".into())
        .split(',')
        .filter_map(|h| h.trim().parse().ok())
        .collect();

    let mut procs: Vec<peer::Peer> = Vec::new();
    let crate_peer = || {
        let mut command = Command::new(&exe);
        command.arg(&url);
        peer::Peer::spawn(command)
    };
    procs.push(crate_peer());
    procs.push(crate_peer());
    let mut pairs = vec![Pair {
        kind: Kind::CrateCrate,
        label: "crate beside crate".into(),
        a: 0,
        b: 1,
    }];
    let mut versions = Vec::new();
    let jvm = jvm_options();
    let jvm: Vec<&str> = jvm.iter().map(String::as_str).collect();
    let javas = javas();
    if javas.is_empty() {
        println!("  THE JAVA PAIRS WERE SKIPPED: no Redisson class path (crate beside crate only)");
    }
    for java in &javas {
        let first = procs.len();
        procs.push(peer::Peer::spawn(java.command(&jvm, &url, &[])));
        procs.push(peer::Peer::spawn(java.command(&jvm, &url, &[])));
        let v = versions.len();
        let version = format!(
            "Redisson {}",
            version_of(&procs[first].ready).unwrap_or("?")
        );
        pairs.push(Pair {
            kind: Kind::JavaJava(v),
            label: format!("{version} beside {version} (reference)"),
            a: first,
            b: first + 1,
        });
        pairs.push(Pair {
            kind: Kind::JavaFirst(v),
            label: format!("{version} first (A), crate (B)"),
            a: first,
            b: 0,
        });
        pairs.push(Pair {
            kind: Kind::CrateFirst(v),
            label: format!("crate first (A), {version} (B)"),
            a: 0,
            b: first,
        });
        versions.push(version);
    }
    println!(
        "  {} pairs; holds of {holds:?} ms; {runs} runs of {rounds} rounds per owner each, the pairs in turn; load average {}",
        pairs.len(),
        load()
    );
    if env_or("BENCH_FAIR_PAIRS", 1u32) != 0 {
        pairs_section(&mut procs, &pairs, &versions, &holds, runs, rounds);
    }
    if env_or("BENCH_FAIR_FLEETS", 1u32) != 0 {
        // Two more crate processes, and two more JVMs of each version, beside the pairs'.
        let mut crates = vec![0, 1];
        let mut jvms: Vec<Vec<usize>> = Vec::new();
        for _ in 0..2 {
            crates.push(procs.len());
            procs.push(crate_peer());
        }
        for (v, java) in javas.iter().enumerate() {
            let first = 2 + 2 * v;
            let mut of_version = vec![first, first + 1];
            for _ in 0..2 {
                of_version.push(procs.len());
                procs.push(peer::Peer::spawn(java.command(&jvm, &url, &[])));
            }
            jvms.push(of_version);
        }
        fleets_section(&mut procs, &crates, &jvms, &versions, &holds, runs, rounds);
    }
    for p in procs.iter_mut() {
        let _ = p.global("quit", Duration::from_secs(30));
    }
}

/// The pairs: every run of every pair, then the pooled figures (see the module doc).
fn pairs_section(
    procs: &mut [peer::Peer],
    pairs: &[Pair],
    versions: &[String],
    holds: &[u64],
    runs: usize,
    rounds: usize,
) {
    // Warm-up: one short run of each pair, uncounted.
    for (i, p) in pairs.iter().enumerate() {
        let (a, b) = two(procs, p.a, p.b);
        let _ = peer::hot_lock(a, b, &format!("bench:fair:warm:{i}"), OWNERS, 5, 20);
    }
    let stamp = crate::epoch_ms() as u64;
    let mut all: Vec<Vec<Vec<Fairness>>> = vec![vec![Vec::new(); pairs.len()]; holds.len()];
    for (h, &hold) in holds.iter().enumerate() {
        for run in 0..runs {
            println!(
                "  hold {hold} ms, run {}/{runs} (load average {}):",
                run + 1,
                load()
            );
            for (i, p) in pairs.iter().enumerate() {
                let (a, b) = two(procs, p.a, p.b);
                let name = format!("bench:fair:{stamp}:{hold}:{run}:{i}");
                let f = peer::hot_lock(a, b, &name, OWNERS, rounds, hold);
                println!(
                    "    {:<40} A {:>3} / B {:>3} while both waited (smaller share {:.2}); longest wait A {:>3} / B {:>3} holds; longest run A {:>2} / B {:>2}",
                    p.label,
                    f.while_both[0],
                    f.while_both[1],
                    f.smaller_share,
                    f.longest_wait[0],
                    f.longest_wait[1],
                    f.longest_run[0],
                    f.longest_run[1]
                );
                println!("      order {}", f.order);
                all[h][i].push(f);
            }
        }
    }
    pooled(holds, pairs, versions, &all);
}

fn range(values: &[f64], show: impl Fn(f64) -> String) -> String {
    let (lo, hi) = spread(values);
    format!("{} ({}–{})", show(median(values)), show(lo), show(hi))
}

/// The longest wait of the reference pair (Java beside Java, version `v`): the most any Java
/// owner waited, over its runs; and the median over its runs of each run's longest.
fn reference(pairs: &[Pair], runs: &[Vec<Fairness>], v: usize) -> Option<(f64, f64)> {
    let i = pairs
        .iter()
        .position(|p| matches!(p.kind, Kind::JavaJava(w) if w == v))?;
    let per_run: Vec<f64> = runs[i]
        .iter()
        .map(|f| f.longest_wait[0].max(f.longest_wait[1]) as f64)
        .collect();
    Some((spread(&per_run).1, median(&per_run)))
}

fn pooled(holds: &[u64], pairs: &[Pair], versions: &[String], all: &[Vec<Vec<Fairness>>]) {
    println!();
    println!(
        "  all runs of each pair together (median, smallest–largest over the runs; load average {}):",
        load()
    );
    let mut table = vec![
        "| hold | pair | smaller side's share: median (runs) | Java's share | longest wait, holds waited: Java / crate (most of any run) | Java's longest ÷ beside Java | goals met |".to_owned(),
        "| --- | --- | --- | --- | --- | --- | --- |".to_owned(),
    ];
    for (h, hold) in holds.iter().enumerate() {
        for (i, p) in pairs.iter().enumerate() {
            let runs = &all[h][i];
            let smaller: Vec<f64> = runs.iter().map(|f| f.smaller_share).collect();
            let wait = |side: usize| -> Vec<f64> {
                runs.iter().map(|f| f.longest_wait[side] as f64).collect()
            };
            let mut line = format!(
                "    hold {hold} ms, {}: smaller share {}",
                p.label,
                range(&smaller, |x| format!("{x:.2}"))
            );
            let mut goals = Vec::new();
            let share_ok = median(&smaller) >= 0.40 && spread(&smaller).0 >= 0.35;
            let (java_share, waits, ratio) = match (p.java_side(), p.kind) {
                (Some(js), Kind::JavaFirst(v) | Kind::CrateFirst(v)) => {
                    let shares: Vec<f64> = runs.iter().map(|f| f.share(js)).collect();
                    let (jw, cw) = (wait(js), wait(1 - js));
                    line.push_str(&format!(
                        "; Java's share {}; longest wait Java {} holds, crate {} holds",
                        range(&shares, |x| format!("{x:.2}")),
                        range(&jw, |x| format!("{x:.0}")),
                        range(&cw, |x| format!("{x:.0}"))
                    ));
                    let worst = spread(&jw).1;
                    let ratio = reference(pairs, &all[h], v).map(|(most, med)| {
                        line.push_str(&format!(
                            "; beside Java ({}) at most {most:.0} (median {med:.0}): {:.2}× (goal ≤ 1.25×)",
                            versions[v],
                            worst / most.max(1.0)
                        ));
                        worst / most.max(1.0)
                    });
                    goals.push(format!("share {}", if share_ok { "yes" } else { "no" }));
                    if let Some(r) = ratio {
                        goals.push(format!("wait {}", if r <= 1.25 { "yes" } else { "no" }));
                    }
                    (
                        range(&shares, |x| format!("{x:.2}")),
                        format!("{:.0} / {:.0}", worst, spread(&cw).1),
                        ratio.map_or("-".into(), |r| format!("{r:.2}×")),
                    )
                }
                (_, Kind::CrateCrate) => {
                    let w: Vec<f64> = runs
                        .iter()
                        .map(|f| f.longest_wait[0].max(f.longest_wait[1]) as f64)
                        .collect();
                    line.push_str(&format!(
                        "; longest wait {} holds",
                        range(&w, |x| format!("{x:.0}"))
                    ));
                    goals.push(format!("share {}", if share_ok { "yes" } else { "no" }));
                    ("-".into(), format!("- / {:.0}", spread(&w).1), "-".into())
                }
                _ => {
                    let w: Vec<f64> = runs
                        .iter()
                        .map(|f| f.longest_wait[0].max(f.longest_wait[1]) as f64)
                        .collect();
                    line.push_str(&format!(
                        "; longest wait {} holds",
                        range(&w, |x| format!("{x:.0}"))
                    ));
                    goals.push("(reference)".into());
                    ("-".into(), format!("{:.0} / -", spread(&w).1), "-".into())
                }
            };
            println!("{line}");
            table.push(format!(
                "| {hold} ms | {} | {} | {java_share} | {waits} | {ratio} | {} |",
                p.label,
                range(&smaller, |x| format!("{x:.2}")),
                goals.join(", ")
            ));
        }
    }
    println!();
    println!("  summary (goals of issue 30: smaller share ≥ 0.40 median and ≥ 0.35 every run; Java's longest wait ≤ 1.25× beside Java):");
    println!();
    for l in table {
        println!("{l}");
    }
}

/// Disjoint peers of `procs`, in the order of `idx`.
fn pick<'a>(procs: &'a mut [peer::Peer], idx: &[usize]) -> Vec<&'a mut peer::Peer> {
    let mut slots: Vec<Option<&mut peer::Peer>> = procs.iter_mut().map(Some).collect();
    idx.iter()
        .map(|&i| slots[i].take().expect("distinct processes"))
        .collect()
}

/// One fleet of the section: its crate processes, and its Java processes of one version.
struct Shape {
    crates: usize,
    javas: usize,
    /// The version's index (`None`: no Java).
    version: Option<usize>,
}

impl Shape {
    fn label(&self, versions: &[String]) -> String {
        match self.version {
            None => format!("{} crate", self.crates),
            Some(v) if self.crates == 0 => format!("{} × {} (reference)", self.javas, versions[v]),
            Some(v) => format!("{} crate + {} × {}", self.crates, self.javas, versions[v]),
        }
    }
}

/// The fleets (see the module doc).
fn fleets_section(
    procs: &mut [peer::Peer],
    crates: &[usize],
    jvms: &[Vec<usize>],
    versions: &[String],
    holds: &[u64],
    runs: usize,
    rounds: usize,
) {
    println!();
    println!("== fairness: fleets of crate and Java processes, 3 owners each, on one hot lock ==");
    let mut shapes = Vec::new();
    for v in 0..jvms.len() {
        for (crates, javas) in [(2, 1), (3, 1), (2, 2), (1, 2), (0, 3), (0, 4)] {
            shapes.push(Shape {
                crates,
                javas,
                version: Some(v),
            });
        }
    }
    for crates in [3, 4] {
        shapes.push(Shape {
            crates,
            javas: 0,
            version: None,
        });
    }
    // Warm-up: every process in one short fleet per version (the JVMs' JIT), uncounted.
    for (v, of_version) in jvms.iter().enumerate() {
        let idx: Vec<usize> = crates.iter().chain(of_version).copied().collect();
        let mut fleet = pick(procs, &idx);
        let _ =
            peer::fleet_on_hot_lock(&mut fleet, &format!("bench:fleet:warm:{v}"), OWNERS, 5, 20);
    }
    let stamp = crate::epoch_ms() as u64;
    let mut all: Vec<Vec<Vec<FleetShares>>> = vec![vec![Vec::new(); shapes.len()]; holds.len()];
    for (h, &hold) in holds.iter().enumerate() {
        for run in 0..runs {
            println!(
                "  fleets, hold {hold} ms, run {}/{runs} (load average {}):",
                run + 1,
                load()
            );
            for (i, shape) in shapes.iter().enumerate() {
                let mut idx: Vec<usize> = crates[..shape.crates].to_vec();
                if let Some(v) = shape.version {
                    // The version's JVMs take turns being first.
                    let n = jvms[v].len();
                    idx.extend((0..shape.javas).map(|k| jvms[v][(run + k) % n]));
                }
                let mut fleet = pick(procs, &idx);
                let name = format!("bench:fleet:{stamp}:{hold}:{run}:{i}");
                let f = peer::fleet_on_hot_lock(&mut fleet, &name, OWNERS, rounds, hold);
                println!("    {:<36} {f}", shape.label(versions));
                all[h][i].push(f);
            }
        }
    }
    fleets_pooled(holds, &shapes, versions, &all);
}

fn fleets_pooled(
    holds: &[u64],
    shapes: &[Shape],
    versions: &[String],
    all: &[Vec<Vec<FleetShares>>],
) {
    println!();
    println!(
        "  fleets, all runs together (median, smallest–largest over the runs; goals of issue 39: \
         every process ≥ 0.6 / P median and every run ≥ 80 % of it; a Java process's longest \
         wait ≤ 1.25× the longest of the all-Java fleet of the same size in the same run):"
    );
    println!();
    println!("| hold | fleet | share of each process: median (runs); crate first, Java last | smallest median ÷ (0.6 / P) | Java's longest wait ÷ all-Java's, median (runs) | goals met |");
    println!("| --- | --- | --- | --- | --- | --- |");
    for (h, hold) in holds.iter().enumerate() {
        for (i, shape) in shapes.iter().enumerate() {
            let runs = &all[h][i];
            let p = shape.crates + shape.javas;
            let floor = 0.6 / p as f64;
            let mut cells = Vec::new();
            let mut smallest = f64::INFINITY;
            let mut every_run = true;
            for side in 0..p {
                let shares: Vec<f64> = runs.iter().map(|f| f.share(side)).collect();
                smallest = smallest.min(median(&shares));
                every_run &= spread(&shares).0 >= 0.8 * floor;
                let who = if side < shape.crates { "crate" } else { "Java" };
                cells.push(format!("{who} {}", range(&shares, |x| format!("{x:.2}"))));
            }
            // The all-Java fleet of the same size and version, run by run.
            let reference = shape.version.and_then(|v| {
                shapes
                    .iter()
                    .position(|o| o.version == Some(v) && o.crates == 0 && o.javas == p)
            });
            let ratio = match reference {
                Some(r) if shape.crates > 0 && shape.javas > 0 => {
                    let ratios: Vec<f64> = runs
                        .iter()
                        .zip(&all[h][r])
                        .map(|(f, jf)| {
                            let java = (shape.crates..p)
                                .map(|s| f.longest_wait[s])
                                .max()
                                .unwrap_or(0);
                            let alone = jf.longest_wait.iter().copied().max().unwrap_or(0);
                            java as f64 / alone.max(1) as f64
                        })
                        .collect();
                    Some(ratios)
                }
                _ => None,
            };
            let reference_fleet = shape.version.is_some() && shape.crates == 0;
            let goals = if reference_fleet {
                "(reference)".to_owned()
            } else {
                let share_ok = smallest >= floor && every_run;
                let mut g = format!("share {}", if share_ok { "yes" } else { "no" });
                if let Some(r) = &ratio {
                    g.push_str(&format!(
                        ", wait {}",
                        if median(r) <= 1.25 { "yes" } else { "no" }
                    ));
                }
                g
            };
            println!(
                "| {hold} ms | {} | {} | {:.2} | {} | {goals} |",
                shape.label(versions),
                cells.join("; "),
                smallest / floor,
                ratio.map_or("-".to_owned(), |r| range(&r, |x| format!("{x:.2}×"))),
            );
        }
    }
}
