//! The `scale` section: many holds, many waiters and churn on distinct lock names, the crate
//! beside real Java Redisson in one run on one server.
//!
//! Every side is a process of its own driven by the `scale` commands (an extension of the peer
//! protocol, `docs/performance.md`, "The scale commands"): the crate's `lock-peer` and the Java
//! driver of each Redisson version. Each row starts a fresh process per side (so its memory
//! starts from the same place), with `--watchdog-ms BENCH_SCALE_WATCHDOG_MS` (10 000: a renewal
//! every 3.3 s; 3 000 is the stress the issue measured), and the server is flushed between rows. Memory is read from
//! `/proc/<pid>/status`: per hold and per waiter, the growth of the anonymous memory
//! (`RssAnon`: a JVM's heap as it grows, the crate's allocator's), and of the RSS beside it
//! (which also counts the program's code, paged in as it first runs: about 1 MiB of the
//! crate's for its first waiter, shared and reclaimable, not memory the waiters use).
//!
//! * **Held locks** (`BENCH_SCALE_HOLDS`, 1k, 10k, 100k): 16 owners take the locks
//!   (`scale hold`), then the locks are held for two watchdog timeouts: the memory each hold added,
//!   the rate they were taken at, the server's commands and CPU per held lock and second over
//!   that time (renewals), and how many of the locks still exist at its end; then all are
//!   released at once (`scale release`: the crate drops every guard together) and the RSS
//!   after, and after 3 s idle.
//! * **Waiters** (`BENCH_SCALE_WAITERS`, 1k, 10k): a crate `lock-peer` holds the locks; the
//!   side starts one waiter per lock (`scale wait`, 60 s), each an owner of its own, on
//!   distinct locks. Once the subscriptions stop growing: the memory each waiter added and the
//!   channels subscribed (`PUBSUB CHANNELS`). Then the holder releases every lock at once, and
//!   the row says how many waiters acquired, timed out or failed, and the time from the start
//!   of the releases to the last acquisition. The crate's own counters after its release
//!   (`scale stats`) show what is left.
//! * **Churn**: 200 000 lock + unlock on distinct names by 32 owners (`scale churn`): RSS
//!   before, after and after 5 s idle, keys left; and three cycles of holding 10 000 locks
//!   and releasing them all at once: the RSS after each release.
//!
//! Knobs: `BENCH_SCALE_WATCHDOG_MS`, `BENCH_SCALE_HOLDS`, `BENCH_SCALE_WAITERS` (empty: no
//! row), `BENCH_SCALE_CHURN` (200000; 0: no churn rows), `BENCH_JAVA_OPTS`.

use std::time::{Duration, Instant};

use fred::{
    interfaces::{ClientLike, KeysInterface, PubsubInterface},
    types::config::Config as FredConfig,
};

use crate::{cpu_time, field, javas, jvm_options, load, lock_peer, server_pid};
use compat_tests::{java::version_of, peer::Peer};

/// How a side's process is started.
enum Kind {
    Crate(std::path::PathBuf),
    Java(compat_tests::java::Java),
}

struct Side {
    label: String,
    kind: Kind,
}

impl Side {
    /// A fresh process of this side on `url`, its watchdog timeout `watchdog_ms`.
    fn start(&self, url: &str, watchdog_ms: u64) -> Peer {
        let wd = watchdog_ms.to_string();
        let extra = ["--watchdog-ms", wd.as_str()];
        match &self.kind {
            Kind::Crate(exe) => Peer::start(&exe.display().to_string(), url, &extra),
            Kind::Java(java) => {
                let jvm = jvm_options();
                let jvm: Vec<&str> = jvm.iter().map(String::as_str).collect();
                Peer::spawn(java.command(&jvm, url, &extra))
            }
        }
    }

    fn short(&self) -> String {
        self.label
            .replace("redisson-lock ", "crate")
            .replace("Redisson ", "j")
            .replace('.', "")
    }
}

/// The RSS of process `pid` in KiB.
fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// The anonymous part of the RSS of process `pid` in KiB (`RssAnon`: the heap, the stacks,
/// a JVM's heap; not the program's code and other files mapped in).
fn anon_kib(pid: u32) -> u64 {
    status_kib(pid, "RssAnon:")
}

fn status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A process's memory at one moment: RSS and its anonymous part, in KiB.
#[derive(Clone, Copy)]
struct Mem {
    rss: u64,
    anon: u64,
}

impl Mem {
    fn of(pid: u32) -> Mem {
        Mem {
            rss: rss_kib(pid),
            anon: anon_kib(pid),
        }
    }

    /// What each of `n` items added since `before`: the anonymous memory first (what the
    /// items use), then the RSS (with the program's code paged in by the first use, about 1
    /// MiB for the crate's waiters, shared and dropped under memory pressure).
    fn per_item(before: Mem, after: Mem, n: usize) -> String {
        format!(
            "{} anonymous (RSS {}, {} -> {})",
            per(before.anon, after.anon, n),
            per(before.rss, after.rss, n),
            mib(before.rss),
            mib(after.rss)
        )
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

/// Bytes per item of an RSS growth (KiB) over `n` items.
fn per(kib_before: u64, kib_after: u64, n: usize) -> String {
    let grown = kib_after as f64 - kib_before as f64;
    format!("{:.0} B", grown * 1024.0 / n.max(1) as f64)
}

/// A `scale` command on `peer`; `None` (printed) when it failed.
fn scale(peer: &mut Peer, label: &str, command: &str, within: Duration) -> Option<String> {
    let line = tokio::task::block_in_place(|| peer.global(command, within));
    if line.starts_with("- scale OK") {
        Some(line)
    } else {
        println!("    {label}: {command}: {line}");
        None
    }
}

fn quit(mut peer: Peer) {
    let _ = tokio::task::block_in_place(|| peer.global("quit", Duration::from_secs(60)));
    let _ = peer.child.wait();
}

/// A number from a comma-separated list in the environment, or `default`.
fn sizes(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name).map_or(default.to_vec(), |v| {
        v.split(',').filter_map(|s| s.trim().parse().ok()).collect()
    })
}

/// Total commands the server processed so far (`INFO stats`).
async fn processed(raw: &fred::clients::Client) -> u64 {
    let info: String = raw
        .info(Some(fred::types::InfoKind::Stats))
        .await
        .unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("total_commands_processed:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// How many of the locks `<prefix><i>`, `i` below `n`, exist now.
async fn existing(raw: &fred::clients::Client, prefix: &str, n: usize) -> u64 {
    let mut total = 0;
    let names: Vec<String> = (0..n).map(|i| format!("{prefix}{i}")).collect();
    for chunk in names.chunks(1000) {
        let count: u64 = raw.exists(chunk.to_vec()).await.unwrap_or(0);
        total += count;
    }
    total
}

/// Channels with subscribers whose name starts with the lock channel of `prefix`.
async fn channels(raw: &fred::clients::Client, prefix: &str) -> usize {
    let pattern = format!("redisson_lock__channel:{{{prefix}*");
    let listed: Vec<String> = raw.pubsub_channels(pattern).await.unwrap_or_default();
    listed.len()
}

/// Keys whose name contains `part` (a scan).
async fn keys_with(raw: &fred::clients::Client, part: &str) -> usize {
    let pattern = format!("*{part}*");
    let mut cursor = "0".to_owned();
    let mut n = 0;
    loop {
        let (next, keys): (String, Vec<String>) = raw
            .custom(
                fred::types::CustomCommand::new_static(
                    "SCAN",
                    fred::types::ClusterHash::Random,
                    false,
                ),
                vec![
                    cursor.clone(),
                    "MATCH".into(),
                    pattern.clone(),
                    "COUNT".into(),
                    "5000".into(),
                ],
            )
            .await
            .unwrap_or_default();
        n += keys.len();
        if next == "0" || next.is_empty() {
            return n;
        }
        cursor = next;
    }
}

/// One side's held-locks row.
async fn held_row(
    side: &Side,
    raw: &fred::clients::Client,
    server: Option<u32>,
    url: &str,
    watchdog_ms: u64,
    n: usize,
) -> Option<String> {
    let _: () = raw.flushall(false).await.unwrap();
    let mut peer = side.start(url, watchdog_ms);
    let pid = peer.child.id();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = Mem::of(pid);
    let prefix = format!("scale:held:{}:", side.short());
    let within = Duration::from_secs(120 + n as u64 / 500);
    let line = scale(
        &mut peer,
        &side.label,
        &format!("scale hold {n} {prefix}"),
        within,
    );
    let Some(line) = line else {
        quit(peer);
        return None;
    };
    let holding = Mem::of(pid);
    // Two watchdog timeouts of renewals.
    let window = Duration::from_millis(2 * watchdog_ms);
    let (c0, s0, t0) = (processed(raw).await, cpu_time(server), Instant::now());
    tokio::time::sleep(window).await;
    let (c1, s1, secs) = (
        processed(raw).await,
        cpu_time(server),
        t0.elapsed().as_secs_f64(),
    );
    let kept = existing(raw, &prefix, n).await;
    let per_lock_s = n as f64 * secs;
    let commands = (c1 - c0) as f64 / per_lock_s;
    let cpu_us = (s1 - s0).as_secs_f64() * 1e6 / per_lock_s;
    let released = scale(&mut peer, &side.label, "scale release", within);
    let after = rss_kib(pid);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let idle = rss_kib(pid);
    quit(peer);
    let release_ms = released.as_deref().map_or(f64::NAN, |l| field(l, "ms"));
    Some(format!(
        "{} per hold; taken at {:.1}k/s; renewals: {:.3} commands and {:.2} µs of \
         server CPU per held lock per second; {kept} of {n} kept after two watchdog periods; \
         all released in {release_ms:.0} ms, RSS then {}, after 3 s idle {}",
        Mem::per_item(before, holding, n),
        field(&line, "per_s") / 1000.0,
        commands,
        cpu_us,
        mib(after),
        mib(idle),
    ))
}

/// One side's waiters row: a crate `lock-peer` holds `n` locks, the side waits on them.
async fn waiters_row(
    side: &Side,
    holder_exe: &std::path::Path,
    raw: &fred::clients::Client,
    url: &str,
    watchdog_ms: u64,
    n: usize,
) -> Option<String> {
    let _: () = raw.flushall(false).await.unwrap();
    let prefix = format!("scale:wait:{}:", side.short());
    let within = Duration::from_secs(120 + n as u64 / 200);
    let mut holder = Peer::start(
        &holder_exe.display().to_string(),
        url,
        &["--watchdog-ms", &watchdog_ms.to_string()],
    );
    scale(
        &mut holder,
        "holder",
        &format!("scale hold {n} {prefix}"),
        within,
    )?;
    let mut peer = side.start(url, watchdog_ms);
    let pid = peer.child.id();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = Mem::of(pid);
    scale(
        &mut peer,
        &side.label,
        &format!("scale wait {n} {prefix} 60000"),
        within,
    )?;
    // Parked: every channel subscribed, or no new one for 3 s (a client that cannot subscribe
    // them all).
    let started = Instant::now();
    let (mut subscribed, mut since) = (0, Instant::now());
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = channels(raw, &prefix).await;
        if now != subscribed {
            (subscribed, since) = (now, Instant::now());
        }
        if now >= n || since.elapsed() > Duration::from_secs(3) || started.elapsed() > within {
            break;
        }
    }
    // The waiters' own share settles too (the last attempts' replies).
    tokio::time::sleep(Duration::from_millis(500)).await;
    let parked = started.elapsed();
    let waiting = Mem::of(pid);
    let released = scale(&mut holder, "holder", "scale release", within)?;
    let waited = scale(&mut peer, &side.label, "scale waited", within)?;
    let at = field(&released, "at");
    let acquired = field(&waited, "acquired");
    let last = field(&waited, "last_at");
    let wake = if acquired > 0.0 {
        format!("{:.0} ms", last - at)
    } else {
        "-".into()
    };
    let mut row = format!(
        "{} per waiter; {subscribed} channels subscribed (parked in {:.1} s); \
         releases took {:.0} ms; {acquired:.0} of {n} acquired, {:.0} timed out, {:.0} \
         failed{}; from the start of the releases to the last acquisition {wake}",
        Mem::per_item(before, waiting, n),
        parked.as_secs_f64(),
        field(&released, "end") - at,
        field(&waited, "timed_out"),
        field(&waited, "errors"),
        waited
            .split_whitespace()
            .find_map(|w| w.strip_prefix("error_kinds="))
            .map_or(String::new(), |k| format!(" ({k})")),
    );
    scale(&mut peer, &side.label, "scale release", within);
    if let Some(stats) = tokio::task::block_in_place(|| {
        let line = peer.global("scale stats", Duration::from_secs(30));
        line.starts_with("- scale OK").then_some(line)
    }) {
        row.push_str(&format!(
            "; left after its release: {}",
            stats.trim_start_matches("- scale OK ")
        ));
    }
    quit(peer);
    quit(holder);
    Some(row)
}

/// One side's churn rows.
async fn churn_rows(
    side: &Side,
    raw: &fred::clients::Client,
    url: &str,
    watchdog_ms: u64,
    ops: usize,
) -> Vec<String> {
    let mut rows = Vec::new();
    let _: () = raw.flushall(false).await.unwrap();
    let mut peer = side.start(url, watchdog_ms);
    let pid = peer.child.id();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = rss_kib(pid);
    let prefix = format!("scale:churn:{}:", side.short());
    let within = Duration::from_secs(300);
    if let Some(line) = scale(
        &mut peer,
        &side.label,
        &format!("scale churn {ops} {prefix} 32"),
        within,
    ) {
        let after = rss_kib(pid);
        tokio::time::sleep(Duration::from_secs(5)).await;
        let idle = rss_kib(pid);
        let left = keys_with(raw, &prefix).await;
        // Unlock receipts (protocol §4.3) name the lock too, and expire on their own.
        let receipts = keys_with(raw, &format!("redisson_unlock_latch:{{{prefix}")).await;
        rows.push(format!(
            "{ops} lock + unlock on distinct names, 32 owners, at {:.1}k/s: RSS {} -> {}, \
             after 5 s idle {}; {left} keys left, {receipts} of them unlock receipts",
            field(&line, "per_s") / 1000.0,
            mib(before),
            mib(after),
            mib(idle)
        ));
    }
    quit(peer);

    let _: () = raw.flushall(false).await.unwrap();
    let mut peer = side.start(url, watchdog_ms);
    let pid = peer.child.id();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start = rss_kib(pid);
    let mut cycles = Vec::new();
    for cycle in 0..3 {
        let prefix = format!("scale:cycle:{}:{cycle}:", side.short());
        if scale(
            &mut peer,
            &side.label,
            &format!("scale hold 10000 {prefix}"),
            within,
        )
        .is_none()
        {
            break;
        }
        let holding = rss_kib(pid);
        scale(&mut peer, &side.label, "scale release", within);
        let after = rss_kib(pid);
        cycles.push(format!(
            "{} holding, {} after the release (+{})",
            mib(holding),
            mib(after),
            mib(after.saturating_sub(holding))
        ));
    }
    quit(peer);
    rows.push(format!(
        "hold 10 000 / release all at once, three times from {}: {}",
        mib(start),
        cycles.join("; ")
    ));
    rows
}

/// The section (see the module doc).
pub async fn figures() {
    println!();
    println!("== scale: many holds, many waiters, churn; the crate beside real Java Redisson ==");
    let Some(exe) = lock_peer() else {
        println!("scale section skipped: no lock-peer");
        return;
    };
    let (_server, url) = crate::server_url();
    let raw = fred::clients::Client::new(FredConfig::from_url(&url).unwrap(), None, None, None);
    raw.init().await.unwrap();
    let server = server_pid(&raw).await;
    let watchdog_ms = crate::env_or("BENCH_SCALE_WATCHDOG_MS", 10_000u64);
    let holds = sizes("BENCH_SCALE_HOLDS", &[1000, 10_000, 100_000]);
    let waiters = sizes("BENCH_SCALE_WAITERS", &[1000, 10_000]);
    let churn = crate::env_or("BENCH_SCALE_CHURN", 200_000usize);

    let probe = Peer::start(&exe.display().to_string(), &url, &[]);
    let mut sides = vec![Side {
        label: format!("redisson-lock {}", version_of(&probe.ready).unwrap_or("?")),
        kind: Kind::Crate(exe.clone()),
    }];
    quit(probe);
    let javas = javas();
    if javas.is_empty() {
        println!("  THE REDISSON SIDE WAS SKIPPED: no Redisson class path (the crate's side only)");
    }
    for java in javas {
        let jvm = jvm_options();
        let jvm: Vec<&str> = jvm.iter().map(String::as_str).collect();
        let probe = Peer::spawn(java.command(&jvm, &url, &[]));
        let label = format!("Redisson {}", version_of(&probe.ready).unwrap_or("?"));
        quit(probe);
        sides.push(Side {
            label,
            kind: Kind::Java(java),
        });
    }
    println!(
        "  watchdog timeout {watchdog_ms} ms (a renewal every {} ms); a fresh process per side \
         and row; load average {}",
        watchdog_ms / 3,
        load()
    );
    for &n in &holds {
        println!();
        println!("  {n} locks held (16 owners, watchdog):");
        for side in &sides {
            match held_row(side, &raw, server, &url, watchdog_ms, n).await {
                Some(row) => println!("    {:<22} {row}", side.label),
                None => println!("    {:<22} failed (above)", side.label),
            }
        }
    }
    for &n in &waiters {
        println!();
        println!("  {n} waiters on {n} distinct locks another process holds:");
        for side in &sides {
            match waiters_row(side, &exe, &raw, &url, watchdog_ms, n).await {
                Some(row) => println!("    {:<22} {row}", side.label),
                None => println!("    {:<22} failed (above)", side.label),
            }
        }
    }
    if churn > 0 {
        println!();
        println!("  churn:");
        for side in &sides {
            for row in churn_rows(side, &raw, &url, watchdog_ms, churn).await {
                println!("    {:<22} {row}", side.label);
            }
        }
    }
    println!();
    println!("  scale section done (load average {})", load());
    let _ = raw.quit().await;
}
