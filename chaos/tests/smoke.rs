//! The 30-second chaos smoke run: a standalone master with a replica behind the fault proxy,
//! two worker processes, every lock variant, a short seeded nemesis schedule (client pauses
//! longer than the lease, kill -9 with and without data, partitions, reply loss, latency,
//! DEBUG SLEEP, RedLock node restarts). It must finish with acquisitions, no unannounced
//! overlap, no stuck wait and no stale fenced write accepted (`--expect-safe`). Nothing in it
//! depends on the machine's speed: overlaps that the holder was told about are allowed, and
//! the stuck bound is the wait plus two leases plus 20 s.

use std::process::Command;

#[test]
fn thirty_seconds_under_faults_without_an_unannounced_overlap() {
    let out = Command::new(env!("CARGO_BIN_EXE_chaos"))
        .args(["run", "--topology", "standalone", "--duration", "30"])
        .args(["--seed", "20", "--processes", "2", "--owners", "5"])
        .args(["--nemesis", "full", "--interval", "3", "--expect-safe"])
        .output()
        .expect("run chaos");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let result = stdout
        .lines()
        .find(|l| l.starts_with("result "))
        .unwrap_or_else(|| panic!("no result line\n{stdout}\n{stderr}"));
    let field = |name: &str| -> u64 {
        result
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {result}"))
    };
    assert!(
        out.status.success(),
        "chaos run failed ({:?})\n{stdout}\n{stderr}",
        out.status
    );
    assert!(field("ops") > 0, "{result}");
    assert_eq!(field("unannounced"), 0, "{stdout}");
    assert_eq!(field("stuck_waits"), 0, "{stdout}");
    assert_eq!(field("stale_accepted"), 0, "{stdout}");
    // The schedule ran.
    assert!(stdout.contains("nemesis t="), "{stdout}");
}
