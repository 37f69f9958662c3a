//! Closed-loop lock+unlock benchmark, and the raw EVALSHA baseline it is compared with.

use std::time::{Duration, Instant};

use redisson_lock::{Client, Result};

/// What each owner locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Each owner its own lock name, watchdog mode.
    Uncontended,
    /// All owners on one name (or spread over `locks` names), watchdog mode.
    Contended,
    /// Like uncontended, with a 30 s lease (no watchdog).
    Leased,
}

impl std::str::FromStr for Mode {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "uncontended" => Ok(Mode::Uncontended),
            "contended" => Ok(Mode::Contended),
            "leased" => Ok(Mode::Leased),
            other => Err(format!("unknown bench mode {other}")),
        }
    }
}

/// Latency statistics of one run; an op is one lock followed by one unlock.
#[derive(Debug, Clone, Copy)]
pub struct Stats {
    /// Completed ops.
    pub ops: u64,
    /// Ops per second over the run.
    pub ops_per_s: f64,
    /// Median latency in µs.
    pub p50_us: u64,
    /// 99th percentile latency in µs.
    pub p99_us: u64,
    /// Largest latency in µs.
    pub max_us: u64,
}

impl Stats {
    /// Computes the statistics of `samples` (µs) collected over `elapsed`.
    pub fn from_samples(mut samples: Vec<u64>, elapsed: Duration) -> Stats {
        samples.sort_unstable();
        let pick = |q: f64| -> u64 {
            if samples.is_empty() {
                0
            } else {
                samples[((samples.len() - 1) as f64 * q).round() as usize]
            }
        };
        Stats {
            ops: samples.len() as u64,
            ops_per_s: samples.len() as f64 / elapsed.as_secs_f64().max(1e-9),
            p50_us: pick(0.50),
            p99_us: pick(0.99),
            max_us: samples.last().copied().unwrap_or(0),
        }
    }

    /// The `lock-peer` rendering: `ops=.. ops_per_s=.. p50_us=.. p99_us=.. max_us=..`.
    pub fn render(&self) -> String {
        format!(
            "ops={} ops_per_s={:.1} p50_us={} p99_us={} max_us={}",
            self.ops, self.ops_per_s, self.p50_us, self.p99_us, self.max_us
        )
    }
}

/// Runs `owners` concurrent owners for `duration`, each looping lock+unlock.
pub async fn run(
    client: &Client,
    mode: Mode,
    owners: usize,
    duration: Duration,
    locks: usize,
) -> Result<Stats> {
    let run_id = uuid_like();
    let started = Instant::now();
    let deadline = started + duration;
    let mut tasks = Vec::with_capacity(owners);
    for i in 0..owners {
        let name = match mode {
            // One name for every process running this mode, so that several processes
            // contend for the same lock (the cross-process row of the benchmark).
            Mode::Contended => format!("bench:contended:c{}", i % locks.max(1)),
            _ => format!("bench:{run_id}:u{i}"),
        };
        let lock = client.get_lock(&name);
        tasks.push(tokio::spawn(async move {
            let mut samples = Vec::with_capacity(4096);
            while Instant::now() < deadline {
                let t = Instant::now();
                let guard = match mode {
                    Mode::Leased => lock.lock_with_lease(Duration::from_secs(30)).await?,
                    _ => lock.lock().await?,
                };
                guard.unlock().await?;
                samples.push(t.elapsed().as_micros() as u64);
            }
            Ok::<_, redisson_lock::Error>(samples)
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.map_err(|_| redisson_lock::Error::Shutdown)??);
    }
    Ok(Stats::from_samples(all, started.elapsed()))
}

fn uuid_like() -> String {
    format!(
        "{:x}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_nanos()
    )
}
