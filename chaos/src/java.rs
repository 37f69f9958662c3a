//! A Java worker: real Redisson, through the project's Java driver
//! (`compat-tests/java/LockPeer.java`, the lock-peer line protocol of
//! `compat-tests/src/main.rs`), started as a child and driven by this process, one logical
//! thread (a real Java thread, Redisson's lock owner) per owner.
//!
//! This process writes the history, on the same `CLOCK_MONOTONIC` as the crate's workers: an
//! acquisition is stamped when its reply arrives and a release before its command is sent, so
//! the interval of a Java hold in the history is one in which Redisson certainly held the lock
//! (as far as Redisson knew): an overlap of two such intervals is a real overlap. Redisson tells
//! a holder nothing, so a Java hold has no state and no look: a watchdog hold has no deadline,
//! a leased one the deadline of its lease counted from the send of its acquisition. It enters
//! the register and makes the fenced writes itself, with the token Redisson's fenced lock
//! returned.

use std::{
    collections::HashMap,
    process::Stdio,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::Duration,
};

use redisson_lock_chaos::clock::now_ns;
use tokio::{
    io::{AsyncBufReadExt, AsyncWriteExt, BufReader},
    process::{ChildStdin, Command},
    sync::{mpsc, Mutex},
};

use crate::{
    lock_names, owner_kinds,
    worker::{group_values, hold_ms, until_stop, History, Register},
    Rng, WorkerArgs, JAVA_KINDS,
};

/// The Java driver's standard input, shared by the owners (one line per command).
#[derive(Clone)]
struct Peer {
    stdin: Arc<Mutex<ChildStdin>>,
}

impl Peer {
    async fn send(&self, line: &str) -> Result<(), String> {
        let mut stdin = self.stdin.lock().await;
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .map_err(|e| format!("java-stdin:{e}"))?;
        stdin.flush().await.map_err(|e| format!("java-stdin:{e}"))
    }
}

/// The reply to one command: `OK <value>` or `ERR <kind>`.
enum Reply {
    Ok(String),
    Err(String),
}

fn parse_reply(line: &str) -> Reply {
    let w: Vec<&str> = line.split_whitespace().collect();
    match w.get(2) {
        Some(&"OK") => Reply::Ok(w.get(3).map_or("", |v| v).to_owned()),
        _ => Reply::Err(
            w.get(3)
                .map_or("java-reply", |k| k.trim_end_matches(':'))
                .to_owned(),
        ),
    }
}

/// The arguments of the Java driver for `--connect`.
fn connect_args(spec: &str) -> Result<Vec<String>, String> {
    let (kind, rest) = spec
        .split_once(':')
        .ok_or("--connect: expected <standalone|sentinel|cluster>:<urls>")?;
    Ok(match kind {
        "standalone" => vec![rest.to_owned()],
        "cluster" => vec!["--cluster".into(), rest.to_owned()],
        "sentinel" => {
            let (master, urls) = rest
                .split_once(':')
                .ok_or("--connect sentinel:<master>:<urls>")?;
            vec!["--sentinel".into(), master.to_owned(), urls.to_owned()]
        }
        other => return Err(format!("unknown topology {other:?}")),
    })
}

/// Runs a Java worker until a line `stop` (or the end) on standard input.
pub async fn run(args: WorkerArgs) -> Result<(), String> {
    let classes = args.java_classes.clone().unwrap_or_default();
    let classpath = std::env::var("REDISSON_CLASSPATH")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .ok_or("a Java worker needs REDISSON_CLASSPATH")?;
    let history = History::create(args.process, &args.history)?;
    let register = Register::connect(&args.register, history.clone()).await?;
    let mut cmd = Command::new("java");
    cmd.arg("-XX:+UseSerialGC")
        .arg("-cp")
        .arg(format!("{classpath}:{classes}"))
        .arg("LockPeer")
        .args(["--watchdog-ms", &args.watchdog_ms.to_string()])
        .args(["--timeout-ms", &args.timeout_ms.to_string()]);
    if args.no_replica_sync {
        cmd.args(["--replica-sync-ms", "0"]);
    }
    cmd.args(connect_args(&args.connect)?)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| format!("start java: {e}"))?;
    let pid = child.id().ok_or("java: no pid")?;
    let stdin = child.stdin.take().ok_or("java: no stdin")?;
    let stdout = child.stdout.take().ok_or("java: no stdout")?;
    let mut lines = BufReader::new(stdout).lines();
    let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
    match first {
        Ok(Ok(Some(l))) if l.starts_with("- ready OK") => {}
        other => return Err(format!("the Java driver did not start: {other:?}")),
    }

    let wanted: Vec<&str> = args
        .variants
        .split(',')
        .filter(|v| JAVA_KINDS.contains(v))
        .collect();
    let kinds = owner_kinds(&wanted, args.process, args.owners);
    if kinds.is_empty() {
        return Err("no variant a Java worker can take".into());
    }
    // Each owner's replies, routed by its thread's name.
    let mut routes: HashMap<String, mpsc::UnboundedSender<String>> = HashMap::new();
    let peer = Peer {
        stdin: Arc::new(Mutex::new(stdin)),
    };
    let stop = Arc::new(AtomicBool::new(false));
    let mut owners = Vec::new();
    for (owner, kind) in kinds.into_iter().enumerate() {
        let owner = owner as u32;
        let (tx, rx) = mpsc::unbounded_channel();
        let thread = format!("t{owner}");
        routes.insert(thread.clone(), tx);
        owners.push(JavaOwner {
            owner,
            thread,
            kind: kind.to_owned(),
            peer: peer.clone(),
            replies: rx,
            register: register.clone(),
            history: history.clone(),
            stop: stop.clone(),
            rng: Rng::new(args.seed ^ ((args.process as u64) << 32) ^ owner as u64),
            wait_ms: args.wait_ms,
            watchdog_ms: args.watchdog_ms,
            locks: args.locks,
            seq: 0,
        });
    }
    let reader = tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let thread = line.split_whitespace().next().unwrap_or("");
            if let Some(tx) = routes.get(thread) {
                let _ = tx.send(line);
            }
        }
        // The driver exited: every owner waiting for a reply hears it (its channel closes).
    });
    let tasks: Vec<_> = owners.into_iter().map(|o| tokio::spawn(o.run())).collect();
    println!("ready java_pid={pid}");
    until_stop().await;
    stop.store(true, Ordering::SeqCst);
    let mut died = Vec::new();
    for (owner, t) in tasks.into_iter().enumerate() {
        match t.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => died.push(format!("owner {owner}: {e}")),
            Err(e) => died.push(format!("owner {owner}: {e}")),
        }
    }
    let _ = peer.send("quit").await;
    match tokio::time::timeout(Duration::from_secs(20), child.wait()).await {
        Ok(Ok(status)) if status.success() => {}
        Ok(Ok(status)) => died.push(format!("the Java driver exited with {status}")),
        Ok(Err(e)) => died.push(format!("the Java driver: {e}")),
        Err(_) => {
            let _ = child.kill().await;
            died.push("the Java driver did not quit within 20 s".into());
        }
    }
    reader.abort();
    register.quit().await;
    history.flush();
    if died.is_empty() {
        Ok(())
    } else {
        Err(died.join("; "))
    }
}

/// One owner: a logical thread of the Java driver.
struct JavaOwner {
    owner: u32,
    thread: String,
    kind: String,
    peer: Peer,
    replies: mpsc::UnboundedReceiver<String>,
    register: Register,
    history: History,
    stop: Arc<AtomicBool>,
    rng: Rng,
    wait_ms: u64,
    watchdog_ms: u64,
    locks: u32,
    seq: u64,
}

impl JavaOwner {
    /// Sends one command on this owner's thread and waits for its reply.
    async fn call(&mut self, command: &str) -> Result<Reply, String> {
        self.peer
            .send(&format!("{} {command}", self.thread))
            .await?;
        let line = self.replies.recv().await.ok_or("java-exited")?;
        Ok(parse_reply(&line))
    }

    async fn run(mut self) -> Result<(), String> {
        let names = lock_names(&self.kind, self.locks);
        while !self.stop.load(Ordering::SeqCst) {
            let name = names[self.rng.below(names.len() as u64) as usize].clone();
            let lease = (self.rng.below(3) == 0)
                .then(|| self.watchdog_ms + 1000 + self.rng.below(self.watchdog_ms));
            let reentry = self.rng.below(4) == 0;
            let (prefix, variant, units) = match self.kind.as_str() {
                "reentrant" => ("", "reentrant", None),
                "fair" => ("f", "fair", None),
                "rw" if self.rng.below(3) < 2 => ("r", "read", Some(format!("{name}@r"))),
                "rw" => ("w", "write", None),
                "fenced" => ("fenced", "fenced", None),
                _ => ("g", "group", None),
            };
            let values = (variant == "group").then(|| group_values(&mut self.rng).join(","));
            let units = match &values {
                Some(v) => Some(
                    v.split(',')
                        .map(|v| format!("{name}/{v}"))
                        .collect::<Vec<_>>()
                        .join(","),
                ),
                None => units,
            };
            let lease_arg = lease.map_or_else(String::new, |l| format!(" {l}"));
            let (acquire, release) = match &values {
                Some(v) => (
                    format!("gtrylock {name} {v} {}{lease_arg}", self.wait_ms),
                    format!("gunlock {name} {v}"),
                ),
                None => (
                    format!("{prefix}trylock {name} {}{lease_arg}", self.wait_ms),
                    format!("{prefix}unlock {name}"),
                ),
            };

            self.seq += 1;
            let (seq, owner, h) = (self.seq, self.owner, self.history.clone());
            let mut begin = format!("{name} {variant} side=java");
            if let Some(l) = lease {
                begin.push_str(&format!(" lease={l}"));
            }
            if let Some(u) = &units {
                begin.push_str(&format!(" units={u}"));
            }
            let t_begin = now_ns();
            h.emit("B", owner, seq, t_begin, &begin);
            let token: Option<u64> = match self.call(&acquire).await? {
                Reply::Ok(v) if v == "true" => None,
                Reply::Ok(v) if variant == "fenced" && v.parse::<u64>().is_ok() => v.parse().ok(),
                Reply::Ok(_) => {
                    h.emit("N", owner, seq, now_ns(), "none");
                    continue;
                }
                Reply::Err(kind) => {
                    h.emit("N", owner, seq, now_ns(), &format!("java:{kind}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            };
            // Valid, as far as Redisson can know, until its lease ends counted from the send
            // (less the crate's drift); a watchdog hold has no deadline.
            let deadline = lease.map_or(u64::MAX, |l| {
                t_begin + (l * 1_000_000) - (l * 10_000 + 2_000_000)
            });
            h.emit(
                "A",
                owner,
                seq,
                now_ns(),
                &format!(
                    "{} {deadline} Held",
                    token.map_or_else(|| "-".to_owned(), |t| t.to_string())
                ),
            );
            // A re-entry by the same thread (hold count 2), released at the end.
            let mut inner = false;
            if reentry && matches!(variant, "reentrant" | "fair" | "write") {
                match self
                    .call(&format!("{prefix}trylock {name} 0{lease_arg}"))
                    .await?
                {
                    Reply::Ok(v) if v == "true" => inner = true,
                    Reply::Ok(v) => h.emit("X", owner, seq, now_ns(), &format!("java-reentry:{v}")),
                    Reply::Err(k) => {
                        h.emit("X", owner, seq, now_ns(), &format!("java-reentry:{k}"))
                    }
                }
            }
            let exclusive = units.is_none();
            if exclusive {
                self.register.enter(&name, owner, seq).await;
            }
            if let Some(tok) = token {
                self.register.fenced_write(&name, owner, seq, tok).await;
            }
            // Redisson tells its holder nothing: the work runs to its end.
            let ms = hold_ms(&mut self.rng);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            if let Some(tok) = token {
                self.register.fenced_write(&name, owner, seq, tok).await;
            }
            h.emit("E", owner, seq, now_ns(), "");
            if exclusive {
                self.register.leave(&name, owner, seq).await;
            }
            let mut outcome = "ok".to_owned();
            for _ in 0..(1 + u8::from(inner)) {
                if let Reply::Err(kind) = self.call(&release).await? {
                    outcome = format!("java:{kind}");
                }
            }
            h.emit("R", owner, seq, now_ns(), &outcome);
            if outcome != "ok" && values.is_none() {
                // An unlock that failed (a timeout, a lost connection) may have left this
                // thread's count behind: taken down to 0, so the next hold starts at 1
                // (Redisson 3.52's batched renewal of a read lock fails for a reader whose
                // count is 2: "attempt to concatenate field '?' (a nil value)").
                if let Reply::Ok(n) = self.call(&format!("{prefix}holdcount {name}")).await? {
                    for _ in 0..n.parse::<u32>().unwrap_or(0).min(8) {
                        let _ = self.call(&release).await?;
                    }
                }
            }
            let think = self.rng.below(20);
            tokio::time::sleep(Duration::from_millis(think)).await;
        }
        Ok(())
    }
}
