//! The `redisson` section: the crate beside real Java Redisson, row by row, in one run on one
//! server.
//!
//! **Parity.** Both sides are processes of their own, started once for the whole section and
//! driven by the same line-protocol command, `bench <mode> <owners> <millis> [locks]`
//! (`shared/peer-protocol.md`): the crate's `lock-peer` runs `compat_tests::bench::run`, the
//! Java driver (`compat-tests/java/LockPeer.java`) the same loop with Java threads over
//! Redisson's `RLock` (`lock()` or `lock(30 s lease)`, then `unlock()`; an op is one lock and one
//! unlock, timed together). Each uses its client's default settings, as a service would.
//!
//! **Rounds.** Every row runs `BENCH_ROUNDS` (5) rounds of `BENCH_ROUND_MS` (2000 ms) per side,
//! the sides taking turns within each round, in the opposite order in the next (A B … then … B
//! A), so that a noisy minute on the shared machine hits every side alike; each round also
//! measures the server's pipelined ceiling for the row (below). Before the counted rounds every
//! side runs the row once, uncounted (the JVM's warm-up: its JIT compiles the hot paths during
//! the first seconds), and every Java process runs 3 s of `bench uncontended 16` at start.
//! Printed per round and per row: each side's ops/s, p50 and p99; the ratio of the crate's
//! ops/s to Redisson's **of the same round**; the median and the spread (smallest–largest) over
//! the rounds.
//!
//! **The ceiling** of a row: a bare fred client in this process, with as many tasks as the row
//! has owners, each sending the crate's acquire and release scripts (`EVALSHA`, the pair a
//! lock+unlock sends) back to back on a lock of its own, on one connection (fred writes the
//! commands queued meanwhile together: pipelining). Pairs per second. For one owner that is
//! the round-trip bound; with many owners, what the server and one client connection can do
//! for that script pair. For the one-lock row it is one task's pairs (the round-trip bound
//! again): a lock has one holder at a time, and a client whose hand-over costs a release and an
//! acquisition (two scripts, one after the other) cannot hand it over faster than that.
//!
//! **Costs.** Around each side's run: the CPU time of its process and of `redis-server`
//! (`/proc/<pid>/stat`, 10 ms ticks), and the server commands it sent (`INFO commandstats`:
//! script calls, (un)subscriptions, `UNLINK`, `PING`, `PUBSUB NUMSUB`); per op. With the wall
//! time they say what bounds a row on 2 cores: a server at ~100 % of a core, or client + server
//! near 200 % (the machine's CPU), or neither (round trips, hand-offs).
//!
//! Knobs: `BENCH_ROUNDS`, `BENCH_ROUND_MS`, `BENCH_ROWS` (labels' short names, comma-separated:
//! `1,16,64,one,leased`), `BENCH_PEER_BEFORE=<another lock-peer>` (adds that binary as a side
//! of its own, e.g. one built before a change), `BENCH_JAVA_OPTS`.

use std::time::Duration;

use fred::{interfaces::ClientLike, types::config::Config as FredConfig};

use crate::{
    cpu_time, field, javas, jvm_options, load, lock_peer, median, pair_ceiling, peer::Peer,
    sent_commands, server_pid, server_url, spread, Latch,
};
use compat_tests::java::version_of;

/// One row of the section.
struct Row {
    /// The short name `BENCH_ROWS` uses.
    key: &'static str,
    label: &'static str,
    mode: &'static str,
    owners: usize,
    /// The goal, as stated by the issues (34; 30 for the one-lock row).
    goal: &'static str,
    /// Tasks of the row's ceiling (see the module doc).
    ceiling_tasks: usize,
}

const ROWS: [Row; 5] = [
    Row {
        key: "1",
        label: "1 owner",
        mode: "uncontended",
        owners: 1,
        goal: ">= 5x Redisson",
        ceiling_tasks: 1,
    },
    Row {
        key: "16",
        label: "16 owners, distinct locks",
        mode: "uncontended",
        owners: 16,
        goal: ">= 5x Redisson",
        ceiling_tasks: 16,
    },
    Row {
        key: "64",
        label: "64 owners, distinct locks",
        mode: "uncontended",
        owners: 64,
        goal: ">= 5x Redisson, >= 50 % of the ceiling",
        ceiling_tasks: 64,
    },
    Row {
        key: "one",
        label: "16 owners, one lock",
        mode: "contended",
        owners: 16,
        goal: ">= 3x Redisson, p99 <= 20 ms",
        ceiling_tasks: 1,
    },
    Row {
        key: "leased",
        label: "16 owners, leased",
        mode: "leased",
        owners: 16,
        goal: ">= 5x Redisson",
        ceiling_tasks: 16,
    },
];

/// A side: a process that speaks the protocol.
struct Side {
    label: String,
    peer: Peer,
    java: bool,
}

/// What one side's run (or one ceiling measurement) gave.
#[derive(Debug, Clone, Copy, Default)]
struct Sample {
    ops_per_s: f64,
    p50_us: f64,
    p99_us: f64,
    /// CPU of the side's process per op (µs).
    client_cpu_us: f64,
    /// CPU of redis-server per op (µs).
    server_cpu_us: f64,
    /// The side's process busy, in cores (CPU time over wall time).
    client_cores: f64,
    /// redis-server busy, in cores.
    server_cores: f64,
    /// Server commands per op.
    commands: f64,
}

/// The CPU counters around a measurement.
struct Meter {
    client: Option<u32>,
    server: Option<u32>,
    at: std::time::Instant,
    client_cpu: Duration,
    server_cpu: Duration,
    commands: u64,
}

impl Meter {
    async fn start(raw: &fred::clients::Client, client: Option<u32>, server: Option<u32>) -> Meter {
        let commands = sent_commands(raw).await;
        Meter {
            client,
            server,
            at: std::time::Instant::now(),
            client_cpu: cpu_time(client),
            server_cpu: cpu_time(server),
            commands,
        }
    }

    /// Fills the costs of `s` (whose `ops_per_s` is set) from the counters now.
    async fn finish(self, raw: &fred::clients::Client, mut s: Sample) -> Sample {
        let wall = self.at.elapsed().as_secs_f64();
        let client = (cpu_time(self.client) - self.client_cpu).as_secs_f64();
        let server = if self.server.is_some() {
            (cpu_time(self.server) - self.server_cpu).as_secs_f64()
        } else {
            0.0
        };
        let commands = sent_commands(raw).await - self.commands;
        let ops = (s.ops_per_s * wall).max(1.0);
        s.client_cpu_us = client * 1e6 / ops;
        s.server_cpu_us = server * 1e6 / ops;
        s.client_cores = client / wall;
        s.server_cores = server / wall;
        s.commands = commands as f64 / ops;
        s
    }
}

/// Runs `bench` on a side; `None` (printed) if it failed.
async fn bench_on(
    side: &mut Side,
    raw: &fred::clients::Client,
    server: Option<u32>,
    row: &Row,
    millis: u64,
) -> Option<Sample> {
    let pid = Some(side.peer.child.id());
    let meter = Meter::start(raw, pid, server).await;
    let command = format!("bench {} {} {millis}", row.mode, row.owners);
    let line = tokio::task::block_in_place(|| {
        side.peer
            .global(&command, Duration::from_millis(millis + 120_000))
    });
    if !line.starts_with("- bench OK") {
        println!("    {}: {command}: {line}", side.label);
        return None;
    }
    let s = Sample {
        ops_per_s: field(&line, "ops_per_s"),
        p50_us: field(&line, "p50_us"),
        p99_us: field(&line, "p99_us"),
        ..Sample::default()
    };
    Some(meter.finish(raw, s).await)
}

/// The row's ceiling (see the module doc), with this process as the client, its releases
/// writing `latch`.
async fn ceiling(
    raw: &fred::clients::Client,
    server: Option<u32>,
    row: &Row,
    millis: u64,
    latch: Latch,
) -> Sample {
    let meter = Meter::start(raw, None, server).await;
    let pairs = pair_ceiling(raw, row.ceiling_tasks, Duration::from_millis(millis), latch).await;
    meter
        .finish(
            raw,
            Sample {
                ops_per_s: pairs,
                ..Sample::default()
            },
        )
        .await
}

fn rate(x: f64) -> String {
    if x >= 10_000.0 {
        format!("{:.1}k", x / 1000.0)
    } else if x >= 1000.0 {
        format!("{:.2}k", x / 1000.0)
    } else {
        format!("{x:.0}")
    }
}

fn ms(us: f64) -> String {
    if us < 1000.0 {
        format!("{:.2}", us / 1000.0)
    } else {
        format!("{:.1}", us / 1000.0)
    }
}

/// `median (lo–hi)` of `values`, each shown by `show`.
fn med_spread(values: &[f64], show: impl Fn(f64) -> String) -> String {
    if values.is_empty() {
        return "-".into();
    }
    let (lo, hi) = spread(values);
    format!("{} ({}–{})", show(median(values)), show(lo), show(hi))
}

/// What a row measured: per side, then the ceiling, per counted round.
struct RowResult {
    sides: Vec<Vec<Sample>>,
    ceiling: Vec<Sample>,
    /// The ceiling whose releases write a receipt per unlock (`Latch::PerUnlock`).
    receipts: Vec<Sample>,
}

/// Who runs in a round's turn.
#[derive(Clone, Copy)]
enum Turn {
    Ceiling(Latch),
    Side(usize),
}

/// The section (see the module doc).
pub async fn figures() {
    println!();
    println!("== redisson: the crate beside real Java Redisson, same server, same run ==");
    let Some(exe) = lock_peer() else {
        println!("redisson section skipped: no lock-peer");
        return;
    };
    let (_server, url) = server_url();
    let raw = fred::clients::Client::new(FredConfig::from_url(&url).unwrap(), None, None, None);
    raw.init().await.unwrap();
    let server = server_pid(&raw).await;
    let rounds = crate::env_or("BENCH_ROUNDS", 5usize).max(1);
    let millis = crate::env_or("BENCH_ROUND_MS", 2000u64).max(100);
    let rows: Vec<&Row> = match std::env::var("BENCH_ROWS") {
        Ok(keys) => ROWS
            .iter()
            .filter(|r| keys.split(',').any(|k| k.trim() == r.key))
            .collect(),
        Err(_) => ROWS.iter().collect(),
    };

    let mut sides = Vec::new();
    let start_peer = |exe: &std::path::Path| {
        let mut command = std::process::Command::new(exe);
        command.arg(&url);
        Peer::spawn(command)
    };
    let peer = start_peer(&exe);
    sides.push(Side {
        label: format!(
            "redisson-lock {}",
            version_of(&peer.ready).unwrap_or("?").to_owned()
        ),
        peer,
        java: false,
    });
    if let Ok(before) = std::env::var("BENCH_PEER_BEFORE") {
        sides.push(Side {
            label: "redisson-lock (before)".into(),
            peer: start_peer(std::path::Path::new(&before)),
            java: false,
        });
    }
    let jvm = jvm_options();
    let jvm: Vec<&str> = jvm.iter().map(String::as_str).collect();
    let javas = javas();
    if javas.is_empty() {
        println!("  THE REDISSON SIDE WAS SKIPPED: no Redisson class path (the crate's side and the ceilings only)");
    }
    for java in &javas {
        let mut peer = Peer::spawn(java.command(&jvm, &url, &[]));
        let label = format!("Redisson {}", version_of(&peer.ready).unwrap_or("?"));
        // The JVM's first seconds compile the hot paths: uncounted.
        let warm = tokio::task::block_in_place(|| {
            peer.global("bench uncontended 16 3000", Duration::from_secs(120))
        });
        println!("  {label} started (warm-up: {warm})");
        sides.push(Side {
            label,
            peer,
            java: true,
        });
    }
    let reference = sides.iter().position(|s| s.java);
    println!(
        "  {rounds} rounds of {millis} ms per side and row, the sides in turn (order reversed every other round), \
         after one uncounted round each; the ceiling measured in every round. load average {}",
        load()
    );
    let labels: Vec<String> = sides.iter().map(|s| s.label.clone()).collect();

    let mut results = Vec::new();
    for row in &rows {
        println!();
        println!(
            "  {} (bench {} {}; the ceiling: {} task(s) of bare pairs):",
            row.label, row.mode, row.owners, row.ceiling_tasks
        );
        for side in sides.iter_mut() {
            let _ = bench_on(side, &raw, server, row, millis).await;
        }
        let mut result = RowResult {
            sides: vec![Vec::new(); sides.len()],
            ceiling: Vec::new(),
            receipts: Vec::new(),
        };
        for round in 0..rounds {
            // Ceilings and sides in turn; reversed every other round.
            let mut order: Vec<Turn> = [Turn::Ceiling(Latch::Fixed)]
                .into_iter()
                .chain((0..sides.len()).map(Turn::Side))
                .chain([Turn::Ceiling(Latch::PerUnlock)])
                .collect();
            if round % 2 == 1 {
                order.reverse();
            }
            let mut got: Vec<Option<Sample>> = vec![None; sides.len()];
            let (mut top, mut top_receipts) = (Sample::default(), Sample::default());
            for who in order {
                match who {
                    Turn::Ceiling(Latch::Fixed) => {
                        top = ceiling(&raw, server, row, millis, Latch::Fixed).await
                    }
                    Turn::Ceiling(Latch::PerUnlock) => {
                        top_receipts = ceiling(&raw, server, row, millis, Latch::PerUnlock).await
                    }
                    Turn::Side(i) => {
                        got[i] = bench_on(&mut sides[i], &raw, server, row, millis).await
                    }
                }
            }
            let mut line = format!("    round {}:", round + 1);
            for (i, s) in got.iter().enumerate() {
                if let Some(s) = s {
                    line.push_str(&format!(
                        " {} {}/s p50 {} p99 {} ms |",
                        labels[i],
                        rate(s.ops_per_s),
                        ms(s.p50_us),
                        ms(s.p99_us)
                    ));
                }
            }
            if let (Some(Some(ours)), Some(Some(theirs))) = (got.first(), reference.map(|r| got[r]))
            {
                line.push_str(&format!(
                    " {:.2}x |",
                    ours.ops_per_s / theirs.ops_per_s.max(1e-9)
                ));
            }
            line.push_str(&format!(
                " ceiling {}/s, with receipts {}/s",
                rate(top.ops_per_s),
                rate(top_receipts.ops_per_s)
            ));
            if got.iter().all(Option::is_some) {
                for (i, s) in got.into_iter().enumerate() {
                    result.sides[i].extend(s);
                }
                result.ceiling.push(top);
                result.receipts.push(top_receipts);
            } else {
                line.push_str(" (a side failed: round not counted)");
            }
            println!("{line}");
        }
        print_row(row, &labels, &result);
        results.push(result);
    }
    summary(&rows, &labels, &results, reference);
    for side in sides.iter_mut() {
        let _ = tokio::task::block_in_place(|| side.peer.global("quit", Duration::from_secs(30)));
    }
    let _ = raw.quit().await;
}

/// Per-round ratios of side `i` to side `r` (rounds where both ran).
fn ratios(result: &RowResult, i: usize, r: usize) -> Vec<f64> {
    result.sides[i]
        .iter()
        .zip(&result.sides[r])
        .map(|(a, b)| a.ops_per_s / b.ops_per_s.max(1e-9))
        .collect()
}

fn of<F: Fn(&Sample) -> f64>(samples: &[Sample], f: F) -> Vec<f64> {
    samples.iter().map(f).collect()
}

fn print_row(row: &Row, labels: &[String], result: &RowResult) {
    println!("    median (smallest–largest) over the rounds:");
    for (i, samples) in result.sides.iter().enumerate() {
        let mut line = format!(
            "      {:<24} {}/s  p99 {} ms  CPU/op {} µs client, {} µs server  busy {} + {} cores  {} commands/op",
            labels[i],
            med_spread(&of(samples, |s| s.ops_per_s), rate),
            med_spread(&of(samples, |s| s.p99_us), ms),
            med_spread(&of(samples, |s| s.client_cpu_us), |x| format!("{x:.0}")),
            med_spread(&of(samples, |s| s.server_cpu_us), |x| format!("{x:.0}")),
            format_args!("{:.2}", median(&of(samples, |s| s.client_cores))),
            format_args!("{:.2}", median(&of(samples, |s| s.server_cores))),
            format_args!("{:.2}", median(&of(samples, |s| s.commands))),
        );
        if i > 0 {
            line.push_str(&format!(
                "\n      {:<24} {}: {} / {} (ops/s, per round)",
                "",
                med_spread(&ratios(result, 0, i), |x| format!("{x:.2}x")),
                labels[0],
                labels[i]
            ));
        }
        println!("{line}");
    }
    let c = &result.ceiling;
    let shares: Vec<f64> = result.sides[0]
        .iter()
        .zip(c)
        .map(|(s, c)| s.ops_per_s / c.ops_per_s.max(1e-9) * 100.0)
        .collect();
    println!(
        "      {:<24} {}/s  CPU/op {} µs client, {} µs server  busy {:.2} + {:.2} cores; {} at {} % of it",
        "ceiling (bare fred pairs)",
        med_spread(&of(c, |s| s.ops_per_s), rate),
        med_spread(&of(c, |s| s.client_cpu_us), |x| format!("{x:.0}")),
        med_spread(&of(c, |s| s.server_cpu_us), |x| format!("{x:.0}")),
        median(&of(c, |s| s.client_cores)),
        median(&of(c, |s| s.server_cores)),
        labels[0],
        med_spread(&shares, |x| format!("{x:.0}")),
    );
    let r = &result.receipts;
    let shares: Vec<f64> = result.sides[0]
        .iter()
        .zip(r)
        .map(|(s, c)| s.ops_per_s / c.ops_per_s.max(1e-9) * 100.0)
        .collect();
    println!(
        "      {:<24} {}/s  CPU/op {} µs client, {} µs server  busy {:.2} + {:.2} cores; {} at {} % of it",
        "ceiling, a receipt each",
        med_spread(&of(r, |s| s.ops_per_s), rate),
        med_spread(&of(r, |s| s.client_cpu_us), |x| format!("{x:.0}")),
        med_spread(&of(r, |s| s.server_cpu_us), |x| format!("{x:.0}")),
        median(&of(r, |s| s.client_cores)),
        median(&of(r, |s| s.server_cores)),
        labels[0],
        med_spread(&shares, |x| format!("{x:.0}")),
    );
    println!("      goal: {}", row.goal);
}

/// The ready-to-paste table of the section.
fn summary(rows: &[&Row], labels: &[String], results: &[RowResult], reference: Option<usize>) {
    println!();
    println!(
        "  summary (median of the rounds, smallest–largest in brackets; load average now {}):",
        load()
    );
    println!();
    let javas: Vec<usize> = (0..labels.len())
        .filter(|i| labels[*i].starts_with("Redisson "))
        .collect();
    let crates: Vec<usize> = (0..labels.len()).filter(|i| !javas.contains(i)).collect();
    let mut head = String::from("| row | goal |");
    for &i in &crates {
        head.push_str(&format!(" {} |", labels[i]));
    }
    for &j in &javas {
        head.push_str(&format!(" {} | crate / {} |", labels[j], labels[j]));
    }
    head.push_str(
        " p99 crate / Redisson | crate / ceiling | crate / ceiling with a receipt per unlock | ceiling / Redisson | CPU µs per op: crate + server, Redisson + server | server µs per op: crate, bare pairs, bare pairs with receipts | busy cores: crate + server, Redisson + server |",
    );
    println!("{head}");
    println!("|{}", " --- |".repeat(head.matches(" |").count()));
    for (row, r) in rows.iter().zip(results) {
        let mut line = format!("| {} | {} |", row.label, row.goal);
        for &i in &crates {
            line.push_str(&format!(
                " {}/s |",
                med_spread(&of(&r.sides[i], |s| s.ops_per_s), rate)
            ));
        }
        for &j in &javas {
            line.push_str(&format!(
                " {}/s | {} |",
                med_spread(&of(&r.sides[j], |s| s.ops_per_s), rate),
                med_spread(&ratios(r, 0, j), |x| format!("{x:.2}×"))
            ));
        }
        let p99 = |i: usize| median(&of(&r.sides[i], |s| s.p99_us));
        line.push_str(&format!(
            " {} / {} ms |",
            ms(p99(0)),
            reference.map_or("-".into(), |j| ms(p99(j)))
        ));
        let shares: Vec<f64> = r.sides[0]
            .iter()
            .zip(&r.ceiling)
            .map(|(s, c)| s.ops_per_s / c.ops_per_s.max(1e-9) * 100.0)
            .collect();
        line.push_str(&format!(
            " {} % of {}/s |",
            med_spread(&shares, |x| format!("{x:.0}")),
            rate(median(&of(&r.ceiling, |s| s.ops_per_s)))
        ));
        let shares: Vec<f64> = r.sides[0]
            .iter()
            .zip(&r.receipts)
            .map(|(s, c)| s.ops_per_s / c.ops_per_s.max(1e-9) * 100.0)
            .collect();
        line.push_str(&format!(
            " {} % of {}/s |",
            med_spread(&shares, |x| format!("{x:.0}")),
            rate(median(&of(&r.receipts, |s| s.ops_per_s)))
        ));
        // What a client with no cost beyond a bare fred client's would get (per round).
        let attainable: Vec<f64> = reference.map_or(Vec::new(), |j| {
            r.ceiling
                .iter()
                .zip(&r.sides[j])
                .map(|(c, s)| c.ops_per_s / s.ops_per_s.max(1e-9))
                .collect()
        });
        line.push_str(&format!(
            " {} |",
            med_spread(&attainable, |x| format!("{x:.2}×"))
        ));
        let cpu = |i: usize, f: fn(&Sample) -> f64| median(&of(&r.sides[i], f));
        let pair = |i: usize, a: fn(&Sample) -> f64, b: fn(&Sample) -> f64, digits: usize| {
            format!("{:.digits$} + {:.digits$}", cpu(i, a), cpu(i, b))
        };
        let java = |a: fn(&Sample) -> f64, b: fn(&Sample) -> f64, digits: usize| {
            reference.map_or("-".into(), |j| pair(j, a, b, digits))
        };
        line.push_str(&format!(
            " {}, {} | {:.1}, {:.1}, {:.1} | {}, {} |",
            pair(0, |s| s.client_cpu_us, |s| s.server_cpu_us, 0),
            java(|s| s.client_cpu_us, |s| s.server_cpu_us, 0),
            cpu(0, |s| s.server_cpu_us),
            median(&of(&r.ceiling, |s| s.server_cpu_us)),
            median(&of(&r.receipts, |s| s.server_cpu_us)),
            pair(0, |s| s.client_cores, |s| s.server_cores, 2),
            java(|s| s.client_cores, |s| s.server_cores, 2),
        ));
        println!("{line}");
    }
    let geo = |j: usize| {
        let logs: Vec<f64> = results
            .iter()
            .map(|r| median(&ratios(r, 0, j)).max(1e-9).ln())
            .collect();
        (logs.iter().sum::<f64>() / logs.len().max(1) as f64).exp()
    };
    for &j in &javas {
        println!();
        println!(
            "  geometric mean of the rows' median ratios, {} / {}: {:.2}×",
            labels[0],
            labels[j],
            geo(j)
        );
    }
}
