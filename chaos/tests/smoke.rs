//! The chaos smoke runs (about 28 s in all: two tests side by side, the third after the one
//! without faults).
//!
//! Under faults: 25 s on a standalone master with a replica behind the fault proxy, two worker
//! processes, every lock variant, and a seeded schedule that has every standalone fault once
//! (`--cover`: kill -9 with and without data, client and server pauses longer than the lease,
//! a partition, reply loss with reset connections, latency, DEBUG SLEEP, a RedLock node
//! restart). Each step must have had its effect, seen by the nemesis; every worker must exit
//! cleanly and every owner keep acquiring; no overlap may be unannounced, and each must come
//! after a fault that can cause one; tokens must increase while the counter survives; no
//! stuck wait, no stale fenced write accepted.
//!
//! Without faults: a short run must have no hold told it was in doubt or lost, no overlap at
//! all, announced or not, no register overlap and no repeated token.
//!
//! Keys deleted, and a Java neighbour: 10 s of `DEL`s of held lock keys (connections kept),
//! with a worker of real Redisson (the Java driver) beside the crate's two when
//! `REDISSON_CLASSPATH` is set (else without it, and a line starting with `SKIPPED` says so):
//! every crate holder whose key was deleted must be told within the deletion window, and the
//! crate must never take a lock a Java holder holds (no overlap with a Java holder first that
//! a deletion does not explain).
//!
//! Nothing here depends on the machine's speed: overlaps the holder was told about are allowed
//! under faults, the stuck bound is the wait plus two leases plus 20 s, and the bounds on the
//! number of acquisitions are a small fraction of what a loaded machine does.

use std::{io::Write, process::Command};

/// A finished run: its output and the `key=value` fields of its `result` line.
struct Run {
    stdout: String,
    ok: bool,
}

impl Run {
    fn start(args: &[&str]) -> Run {
        let out = Command::new(env!("CARGO_BIN_EXE_chaos"))
            .args(["run", "--topology", "standalone", "--processes", "2"])
            .args(["--owners", "5", "--expect-safe"])
            .args(args)
            .output()
            .expect("run chaos");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        Run {
            stdout: format!("{stdout}\n--- stderr ---\n{stderr}"),
            ok: out.status.success(),
        }
    }

    /// The line starting with `prefix`.
    fn line(&self, prefix: &str) -> &str {
        self.stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no {prefix:?} line\n{}", self.stdout))
    }

    /// A numeric `name=value` field of the line starting with `prefix`.
    fn field(&self, prefix: &str, name: &str) -> u64 {
        let line = self.line(prefix);
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in {line}\n{}", self.stdout))
    }

    fn result(&self, name: &str) -> u64 {
        self.field("result ", name)
    }

    /// A `side:n` entry of the `result` line's `name=` list (0 if absent).
    fn side(&self, name: &str, side: &str) -> u64 {
        let line = self.line("result ");
        line.split_whitespace()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
            .unwrap_or("")
            .split(',')
            .find_map(|e| e.strip_prefix(&format!("{side}:")))
            .and_then(|v| v.split('/').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    /// The `(acquired, told)` of a kind in the `result` line's `crate_ops_by_kind=` list
    /// (`(0, 0)` if absent).
    fn kind(&self, kind: &str) -> (u64, u64) {
        let line = self.line("result ");
        let entry = line
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix("crate_ops_by_kind(acquired/told)="))
            .unwrap_or("")
            .split(',')
            .find_map(|e| e.strip_prefix(&format!("{kind}:")))
            .unwrap_or("0/0");
        let mut n = entry.split('/').map(|v| v.parse().unwrap_or(0));
        (n.next().unwrap_or(0), n.next().unwrap_or(0))
    }

    /// Every kind of crate holder acquired (`min` times each for the lock variants, at least
    /// once for the leased holds and the nested re-entries): a kind that never acquires
    /// fails the run instead of passing unseen.
    fn assert_every_kind(&self, min: u64) {
        let out = &self.stdout;
        for k in VARIANTS {
            assert!(self.kind(k).0 >= min, "{k} acquired too rarely\n{out}");
        }
        for k in ["leased", "nested"] {
            assert!(self.kind(k).0 >= 1, "no {k} hold\n{out}");
        }
    }

    /// What both runs must show: exit status 0 (`--expect-safe`), the workers exited cleanly,
    /// every owner of the two processes acquired at least `per_owner` times and `total` in all,
    /// no unannounced overlap, none a fault does not explain, no token that failed to increase
    /// while the counter survived, no stuck wait, no stale fenced write accepted.
    /// Without deletions and without Java holders, whom nothing can tell: no unannounced
    /// overlap at all.
    fn assert_safe(&self, per_owner: u64, total: u64) {
        self.assert_safe_with(2, per_owner, total);
        assert_eq!(self.result("unannounced"), 0, "{}", self.stdout);
        assert_eq!(self.result("in_deletion_window"), 0, "{}", self.stdout);
    }

    /// [`assert_safe`](Self::assert_safe) with `workers` worker processes of five owners, where
    /// only the crate's holders must have been told: an overlap of a Java holder (Redisson
    /// tells its holders nothing), or of a crate holder within a deletion's window (told at
    /// its next renewal), is unannounced without breaking the verdict.
    fn assert_safe_with(&self, workers: u64, per_owner: u64, total: u64) {
        let out = &self.stdout;
        assert!(self.ok, "the run failed\n{out}");
        assert_eq!(self.line("verdict "), "verdict safe", "{out}");
        assert_eq!(self.field("workers=", "workers"), workers, "{out}");
        assert_eq!(
            self.field("workers=", "failed"),
            0,
            "a worker failed\n{out}"
        );
        assert!(!out.contains("were killed"), "{out}");
        assert_eq!(self.result("owners"), 5 * workers, "{out}");
        assert!(self.result("min_owner_ops") >= per_owner, "{out}");
        assert!(self.result("ops") >= total, "{out}");
        assert_eq!(self.result("unannounced_crate"), 0, "{out}");
        assert_eq!(self.result("unexplained"), 0, "{out}");
        assert_eq!(self.result("token_regressions"), 0, "{out}");
        assert_eq!(self.result("stuck_waits"), 0, "{out}");
        assert_eq!(self.result("stale_accepted"), 0, "{out}");
    }
}

/// The crate's lock variants, as the workers name them (`rw` owners read and write).
const VARIANTS: [&str; 8] = [
    "reentrant",
    "fair",
    "read",
    "write",
    "fenced",
    "group",
    "multi",
    "redlock",
];

/// The faults of the standalone topology's `full` nemesis.
const FAULTS: [&str; 9] = [
    "kill-persist",
    "kill-wipe",
    "pause-client",
    "pause-server",
    "partition",
    "reply-loss",
    "latency",
    "debug-sleep",
    "redlock-restart",
];

#[test]
fn twenty_five_seconds_under_every_fault_without_an_unannounced_overlap() {
    let run = Run::start(&[
        "--duration",
        "25",
        "--seed",
        "13",
        "--nemesis",
        "full",
        "--cover",
        "--interval",
        "1",
    ]);
    let out = &run.stdout;
    // Every scheduled step ran and had its effect; every fault was among them.
    let steps = run.field("nemesis steps=", "steps");
    assert!(steps >= FAULTS.len() as u64, "{out}");
    assert_eq!(run.field("nemesis steps=", "verified"), steps, "{out}");
    assert_eq!(run.field("nemesis steps=", "failed"), 0, "{out}");
    assert_eq!(run.field("nemesis steps=", "not_run"), 0, "{out}");
    assert!(!out.contains("FAILED"), "{out}");
    for fault in FAULTS {
        assert!(
            out.lines()
                .any(|l| l.starts_with("nemesis t=") && l.contains(&format!(" {fault} ("))),
            "{fault} did not run\n{out}"
        );
    }
    run.assert_safe(5, 100);
    run.assert_every_kind(3);
    // The faults reached the holders: some were told their hold was in doubt or lost.
    assert!(run.result("told") > 0, "{out}");
    // kill-wipe lost the token counters: tokens were handed out again (and excused by it, so
    // `token_regressions` is 0 above for the right reason).
    assert!(run.result("duplicate_tokens") > 0, "{out}");
}

#[test]
fn without_faults_no_overlap_at_all() {
    // The default lease (3 s, renewed every second): a hold is lost only if its renewals stall
    // for 2 s, which no machine does without a fault. (A shorter lease, so that the longest
    // holds need renewals, would catch a watchdog that does not renew, as a 2 s lease did; but
    // with it a holder was told once in about 25 runs on a loaded machine, with no fault. The
    // watchdog has its own tests.)
    let run = Run::start(&["--duration", "10", "--seed", "2", "--nemesis", "none"]);
    let out = &run.stdout;
    assert_eq!(run.field("nemesis steps=", "steps"), 0, "{out}");
    run.assert_safe(3, 50);
    run.assert_every_kind(1);
    // Nobody was told their hold was in doubt or lost (the watchdog renewed every long hold
    // in time), so no overlap either, announced or not.
    assert_eq!(run.result("told"), 0, "{out}");
    assert_eq!(run.result("overlaps"), 0, "{out}");
    assert_eq!(run.result("register_overlaps"), 0, "{out}");
    assert_eq!(run.result("duplicate_tokens"), 0, "{out}");
    assert!(run.result("fenced_writes") > 0, "{out}");
}

#[test]
fn deleted_keys_tell_their_crate_holders_and_java_holds_are_never_taken() {
    let classpath = std::env::var("REDISSON_CLASSPATH").unwrap_or_default();
    let java = !classpath.trim().is_empty();
    if !java {
        // Past the harness's capture: seen even when the test passes.
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED the Java worker of chaos/tests/smoke.rs: no REDISSON_CLASSPATH (README, \
             \"Beside real Java Redisson\"); the key deletions run without it"
        );
    }
    let mut args = vec![
        "--duration",
        "10",
        "--seed",
        "31",
        "--nemesis",
        "del-key",
        "--interval",
        "1",
    ];
    if java {
        args.extend(["--java", "1"]);
    }
    let run = Run::start(&args);
    let out = &run.stdout;
    // Every step deleted a held key (its holders' fields seen in the same script).
    let steps = run.field("nemesis steps=", "steps");
    assert!(steps >= 3, "{out}");
    assert_eq!(run.field("nemesis steps=", "verified"), steps, "{out}");
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("nemesis t=") && l.contains(", held (fields "))
            .count() as u64,
        steps,
        "{out}"
    );
    let workers = if java { 3 } else { 2 };
    run.assert_safe_with(workers, 3, 50);
    run.assert_every_kind(1);
    // No crate holder went untold past the deletion window, and no overlap with a Java holder
    // first is unexplained (the crate took no lock a Java thread held).
    assert_eq!(run.result("unannounced_crate"), 0, "{out}");
    assert_eq!(run.result("java_broken"), 0, "{out}");
    if java {
        assert_eq!(run.field("workers=", "java_workers"), 1, "{out}");
        assert!(run.side("ops_by_side", "java") >= 5, "{out}");
        assert!(run.side("ops_by_side", "crate") >= 50, "{out}");
    }
}
