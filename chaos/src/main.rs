//! `chaos`: runs redisson-lock under faults and counts every overlap of two holders.
//!
//! `chaos run --topology standalone|sentinel|cluster --duration <s> [--seed N]` starts its own
//! servers on free loopback ports (a lock deployment, three independent RedLock nodes and an
//! unfaulted register server), N worker processes (`chaos worker`, this binary) with several
//! owners each, and a seeded nemesis schedule (printed, replayable with the same seed); at the
//! end it checks the merged history (`redisson_lock_chaos::check`) and prints the findings.
//! `chaos check <dir>` checks a kept history again.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use redisson_lock_test_kit::{cluster, proxy, redis_server, sentinel};

mod java;
mod nemesis;
mod recipes;
mod worker;

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand, ValueEnum};

/// The kinds of owners (`--variants`): `rw` owners read two times in three and write
/// otherwise; the others take one kind of lock (`multi`: a `MultiLock` over two of its names).
pub const KINDS: [&str; 7] = [
    "reentrant",
    "fair",
    "rw",
    "fenced",
    "group",
    "multi",
    "redlock",
];

/// The kinds a Java worker's owners can take (Redisson through the Java driver).
pub const JAVA_KINDS: [&str; 5] = ["reentrant", "fair", "rw", "fenced", "group"];

/// The values of a group lock's group (a hold takes one or two of them).
pub const GROUP_VALUES: [&str; 4] = ["a", "b", "c", "d"];

/// The lock names of a kind (each kind contends on its own names; Java and crate owners of a
/// kind on the same ones). A multi-lock takes two of its kind's `n + 2` names.
pub fn lock_names(kind: &str, n: u32) -> Vec<String> {
    let n = if kind == "multi" { n + 2 } else { n.max(1) };
    (0..n).map(|i| format!("chaos-{kind}-{i}")).collect()
}

/// The kind of each owner of process `process`: with `rw` among `kinds`, the first two owners
/// of every process (one if it has fewer than three) read and write, so that each client has
/// several readers; the others take the other kinds in turn, counted across processes (owner
/// `i` of process `p`: kind `p * rest + i` of the rest), so that few processes cover them all.
pub fn owner_kinds<'a>(kinds: &[&'a str], process: u32, owners: u32) -> Vec<&'a str> {
    let others: Vec<&str> = kinds.iter().copied().filter(|k| *k != "rw").collect();
    let rw = if kinds.contains(&"rw") {
        if others.is_empty() {
            owners
        } else if owners >= 3 {
            2
        } else {
            1
        }
    } else {
        0
    };
    let rest = owners - rw;
    (0..owners)
        .map(|i| {
            if i < rw {
                "rw"
            } else {
                let j = (process * rest + (i - rw)) as usize;
                others[j % others.len()]
            }
        })
        .collect()
}

/// A small seeded generator (SplitMix64): the same seed gives the same schedule.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }
}

#[derive(Parser)]
#[command(
    name = "chaos",
    about = "Runs redisson-lock under faults and counts overlapping holders"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start servers, workers and the nemesis; check the history at the end.
    Run(RunArgs),
    /// Check a history kept with `run --keep <dir>`.
    Check {
        /// The directory with the `worker-*.history` files.
        dir: PathBuf,
        /// An attempt longer than this (ms) is a stuck wait.
        #[arg(long, default_value_t = 25_000)]
        stuck_ms: u64,
        /// Also print every overlap: its time (`CLOCK_MONOTONIC` ns), excuse and fault.
        #[arg(long)]
        list: bool,
    },
    /// One worker process (started by `run`).
    #[command(hide = true)]
    Worker(WorkerArgs),
}

/// The deployment under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Topology {
    /// One master with one replica; clients reach the master through a loopback fault proxy.
    Standalone,
    /// One master, two replicas, three sentinels.
    Sentinel,
    /// One master, one replica, three sentinels: a failover leaves the promoted master alone
    /// until the old one is back.
    #[value(name = "sentinel-1-1")]
    Sentinel11,
    /// A 3+3 Redis Cluster.
    Cluster,
}

impl Topology {
    /// The name `--topology` takes.
    pub fn name(self) -> &'static str {
        match self {
            Topology::Standalone => "standalone",
            Topology::Sentinel => "sentinel",
            Topology::Sentinel11 => "sentinel-1-1",
            Topology::Cluster => "cluster",
        }
    }
}

/// Options of `chaos run`.
#[derive(clap::Args, Clone, Debug)]
pub struct RunArgs {
    /// The deployment to run against.
    #[arg(long, value_enum, default_value_t = Topology::Standalone)]
    pub topology: Topology,
    /// Length of the workload in seconds.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(5..=86_400))]
    pub duration: u64,
    /// Seed of the nemesis schedule and of the workload's choices (default: from the clock).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Worker processes.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=32))]
    pub processes: u32,
    /// Owners (concurrent lock users) per worker process.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub owners: u32,
    /// Lock names per variant.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub locks: u32,
    /// Kinds of owners, comma-separated: reentrant, fair, rw (readers and writers), fenced,
    /// group, multi, redlock; the recipes: election, permit, run-once.
    #[arg(long, default_value = "reentrant,fair,rw,fenced,group,multi,redlock")]
    pub variants: String,
    /// Java worker processes (real Redisson through `compat-tests/java/LockPeer.java`) beside
    /// the crate's, with as many owners each, on the same locks (a mixed fleet). Needs
    /// `REDISSON_CLASSPATH` (README, "Beside real Java Redisson").
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=8))]
    pub java: u32,
    /// Faults, comma-separated, or `full` (every fault of the topology) or `none`; see
    /// `--list-faults`.
    #[arg(long, default_value = "full")]
    pub nemesis: String,
    /// Print the faults of each topology and exit.
    #[arg(long)]
    pub list_faults: bool,
    /// Mean pause between two faults, in seconds.
    #[arg(long, default_value_t = 6, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub interval: u64,
    /// Watchdog timeout (the lease) in ms.
    #[arg(long, default_value_t = 3000, value_parser = clap::value_parser!(u64).range(500..=60_000))]
    pub watchdog_ms: u64,
    /// Command timeout in ms.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(100..=60_000))]
    pub timeout_ms: u64,
    /// How long one acquisition waits, in ms.
    #[arg(long, default_value_t = 5000, value_parser = clap::value_parser!(u64).range(0..=600_000))]
    pub wait_ms: u64,
    /// Turn replica sync off (`check_lock_synced_replicas(false)`).
    #[arg(long)]
    pub no_replica_sync: bool,
    /// One hold in N of those the watchdog keeps (taken without a lease; not a run-once job's)
    /// works for two to three leases instead of the usual lengths, so that it lives only by
    /// several renewals: a watchdog that renews too late or too short loses it (0: none).
    #[arg(long, default_value_t = 0)]
    pub long_holds: u64,
    /// No fault in the last N seconds of the run: a step that would still be under way then is
    /// not scheduled (by default only the last 4 s have no fault start). What the crate tells
    /// its holders in that calm stretch no fault explains.
    #[arg(long, default_value_t = 0)]
    pub calm_end: u64,
    /// Keep the history and the nemesis log in this directory (default: a removed temp dir).
    #[arg(long)]
    pub keep: Option<PathBuf>,
    /// Draw the faults from a shuffled bag (each fault once before any twice), so that a
    /// short run has every fault of the nemesis.
    #[arg(long)]
    pub cover: bool,
    /// Exit with status 1 unless: every step of the nemesis had its effect, every worker
    /// exited cleanly, every owner acquired, no unannounced overlap, no overlap unexplained by a
    /// fault before it, no hold told in doubt or lost that no fault explains, no token that
    /// failed to increase while the counter survived, no stuck wait, no stale fenced write
    /// accepted.
    #[arg(long)]
    pub expect_safe: bool,
}

/// Options of a worker process.
#[derive(clap::Args, Clone, Debug)]
pub struct WorkerArgs {
    /// Process number.
    #[arg(long)]
    pub process: u32,
    /// `standalone:<url>`, `sentinel:<master>:<url,url,..>` or `cluster:<url,url,..>`.
    #[arg(long)]
    pub connect: String,
    /// URLs of the RedLock nodes, comma-separated (empty: no RedLock owners).
    #[arg(long, default_value = "")]
    pub redlock: String,
    /// URL of the register server.
    #[arg(long)]
    pub register: String,
    /// The history file to write.
    #[arg(long)]
    pub history: String,
    /// Owners.
    #[arg(long, default_value_t = 5)]
    pub owners: u32,
    /// Lock names per variant.
    #[arg(long, default_value_t = 2)]
    pub locks: u32,
    /// Kinds of owners, comma-separated.
    #[arg(long, default_value = "reentrant,fair,rw,fenced,group,multi,redlock")]
    pub variants: String,
    /// Watchdog timeout in ms.
    #[arg(long, default_value_t = 3000)]
    pub watchdog_ms: u64,
    /// Command timeout in ms.
    #[arg(long, default_value_t = 1000)]
    pub timeout_ms: u64,
    /// Acquisition wait in ms.
    #[arg(long, default_value_t = 5000)]
    pub wait_ms: u64,
    /// Replica sync off.
    #[arg(long)]
    pub no_replica_sync: bool,
    /// One watchdog hold in N works for two to three leases (0: none).
    #[arg(long, default_value_t = 0)]
    pub long_holds: u64,
    /// Seed of the owners' choices.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// A Java worker: the directory of the compiled Java driver (`compat-tests/java/build.sh`);
    /// Redisson's class path comes from `REDISSON_CLASSPATH`.
    #[arg(long)]
    pub java_classes: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("chaos: cannot start the runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match cli.cmd {
        Cmd::Worker(args) => match rt.block_on(async {
            StderrLog::install();
            if args.java_classes.is_some() {
                java::run(args).await
            } else {
                worker::run(args).await
            }
        }) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("chaos worker: {e}");
                ExitCode::from(2)
            }
        },
        Cmd::Check {
            dir,
            stuck_ms,
            list,
        } => match nemesis::check_dir(&dir, stuck_ms) {
            Ok(report) => {
                if list {
                    for o in &report.overlap_list {
                        println!(
                            "overlap at {} ({:?}, {}): {}",
                            o.at,
                            o.excuse,
                            if o.explained {
                                "explained"
                            } else {
                                "unexplained"
                            },
                            o.what
                        );
                    }
                }
                println!("{}", report.summary());
                println!("{}", report.by_fault_line());
                for e in &report.announced_examples {
                    println!("announced overlap: {e}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("chaos check: {e}");
                ExitCode::from(2)
            }
        },
        Cmd::Run(args) => {
            if args.list_faults {
                nemesis::list_faults();
                return ExitCode::SUCCESS;
            }
            match rt.block_on(nemesis::run(args)) {
                Ok(true) => ExitCode::SUCCESS,
                Ok(false) => ExitCode::from(1),
                Err(e) => {
                    eprintln!("chaos: {e}");
                    ExitCode::from(2)
                }
            }
        }
    }
}

/// The crate's log lines on a worker's stderr, stamped with `CLOCK_MONOTONIC` (the histories'
/// clock), when `CHAOS_LOG` names a level (`info`, `debug`, ...). Off by default.
struct StderrLog;

impl StderrLog {
    fn install() {
        let Some(level) = std::env::var("CHAOS_LOG")
            .ok()
            .and_then(|l| l.parse::<log::LevelFilter>().ok())
        else {
            return;
        };
        if log::set_logger(&StderrLog).is_ok() {
            log::set_max_level(level);
        }
    }
}

impl log::Log for StderrLog {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        m.target().starts_with("redisson_lock")
    }

    fn log(&self, r: &log::Record<'_>) {
        if self.enabled(r.metadata()) {
            let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
            eprintln!(
                "{}{:09} [{}] {} {}",
                t.tv_sec,
                t.tv_nsec,
                std::process::id(),
                r.level(),
                r.args()
            );
        }
    }

    fn flush(&self) {}
}
