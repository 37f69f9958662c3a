//! The test side of the `lock-peer` line protocol (`shared/peer-protocol.md`): one process that
//! speaks it (the crate's `lock-peer` or the Java driver over real Redisson), its replies
//! claimed by thread and command; and [`hot_lock`], a fairness run of two peers on one lock
//! ([`fleet_on_hot_lock`]: of any number).
//! Shared by `cross_process.rs`, `beside_java.rs`, `recipes_java.rs` and the bench (`examples/bench/`).

use std::{
    collections::{HashMap, VecDeque},
    io::{BufRead, BufReader, Write},
    process::{Child, ChildStdin, Command, Stdio},
    sync::mpsc,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use crate::fairness::{Fairness, FleetShares, Hold};

/// One `lock-peer` process.
///
/// Lines of different threads interleave in any order, so no line is ever thrown away: a line
/// read while waiting for another one stays buffered until something claims it. Each thread's
/// replies come in the order of its commands, so a thread's reply lines are numbered as they
/// arrive and [`call`](Self::call) claims exactly the reply of the command it sent.
pub struct Peer {
    pub child: Child,
    stdin: ChildStdin,
    lines: mpsc::Receiver<String>,
    /// The client id the peer printed in its `ready` line.
    pub id: String,
    /// The whole `ready` line.
    pub ready: String,
    /// Lines read and not claimed yet, oldest first.
    unclaimed: VecDeque<Line>,
    /// Commands sent to each thread so far.
    sent: HashMap<String, u64>,
    /// Reply lines read from each thread so far.
    replied: HashMap<String, u64>,
}

/// A line of output; thread replies carry their thread and their number within the thread.
struct Line {
    text: String,
    reply_of: Option<(String, u64)>,
}

#[derive(Debug)]
pub struct Reply {
    pub ok: bool,
    pub value: String,
    pub at: u128,
    /// How long the command took in the peer, from its start to its reply (`elapsed_ms=`).
    pub elapsed_ms: f64,
}

impl Reply {
    pub fn parse(line: &str) -> Reply {
        // <thread> <command> OK|ERR <value...> elapsed_ms=<f> at=<ms>
        let rest = line.splitn(3, ' ').nth(2).unwrap_or_default();
        let ok = rest.starts_with("OK ");
        let body = rest.split_once(' ').map(|x| x.1).unwrap_or_default();
        let value = body.split(" elapsed_ms=").next().unwrap().to_owned();
        let at = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("at="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no at= stamp in {line:?}"));
        let elapsed_ms = line
            .split_whitespace()
            .find_map(|w| w.strip_prefix("elapsed_ms="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no elapsed_ms= in {line:?}"));
        Reply {
            ok,
            value,
            at,
            elapsed_ms,
        }
    }
}

/// Words of the peer's input that are global commands, not thread names.
const GLOBAL_COMMANDS: [&str; 6] = ["id", "sleep", "await", "bench", "quit", "halt"];

/// The thread whose reply line an input line will produce, as `lock-peer` decides it: the first
/// word, unless it is a global command, a comment, or alone on the line.
fn thread_of(input: &[u8]) -> Option<String> {
    let mut words = input
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    let thread = std::str::from_utf8(words.next()?).ok()?;
    std::str::from_utf8(words.next()?).ok()?;
    (!thread.starts_with('#') && !GLOBAL_COMMANDS.contains(&thread)).then(|| thread.to_owned())
}

impl Peer {
    /// Starts the crate's `lock-peer` at `exe` with `extra` options on `url` (an integration
    /// test passes `env!("CARGO_BIN_EXE_lock-peer")`, the binary of its own build, which Cargo
    /// names to integration tests only; the bench starts its own).
    pub fn start(exe: &str, url: &str, extra: &[&str]) -> Peer {
        let mut command = Command::new(exe);
        command.args(extra).arg(url);
        Peer::spawn(command)
    }

    /// Starts any program that speaks the protocol (the crate's `lock-peer`, the Java driver)
    /// and waits for its `ready OK` line.
    pub fn spawn(mut command: Command) -> Peer {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start lock-peer");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut peer = Peer {
            child,
            stdin,
            lines,
            id: String::new(),
            ready: String::new(),
            unclaimed: VecDeque::new(),
            sent: HashMap::new(),
            replied: HashMap::new(),
        };
        let ready = peer.line_starting("- ready ", Duration::from_secs(30));
        assert!(ready.starts_with("- ready OK id="), "{ready}");
        peer.id = ready
            .split_whitespace()
            .find_map(|w| w.strip_prefix("id="))
            .unwrap()
            .to_owned();
        peer.ready = ready;
        peer
    }

    pub fn send(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
    }

    /// Sends raw bytes (a line that need not be valid UTF-8) and a newline. Returns the thread
    /// and number of the reply it will produce, if it is a thread command.
    pub fn send_bytes(&mut self, line: &[u8]) -> Option<(String, u64)> {
        self.stdin.write_all(line).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
        let thread = thread_of(line)?;
        let n = self.sent.entry(thread.clone()).or_insert(0);
        *n += 1;
        Some((thread, *n))
    }

    /// Sends several lines in one write (commands that should start together).
    pub fn send_lines(&mut self, lines: &[String]) {
        let mut all = Vec::new();
        for line in lines {
            all.extend_from_slice(line.as_bytes());
            all.push(b'\n');
            if let Some(thread) = thread_of(line.as_bytes()) {
                *self.sent.entry(thread).or_insert(0) += 1;
            }
        }
        self.stdin.write_all(&all).unwrap();
        self.stdin.flush().unwrap();
    }

    /// Reads one more line into the buffer; panics if none comes before `deadline`.
    fn read_line(&mut self, deadline: Instant, waiting_for: &dyn std::fmt::Display) {
        let left = deadline.saturating_duration_since(Instant::now());
        let text = self.lines.recv_timeout(left).unwrap_or_else(|_| {
            let unclaimed: Vec<&str> = self.unclaimed.iter().map(|l| l.text.as_str()).collect();
            panic!("no line {waiting_for} from the peer in time; unclaimed: {unclaimed:#?}")
        });
        self.take(text);
    }

    /// Buffers a line read from the peer, numbering thread replies.
    fn take(&mut self, text: String) {
        let reply_of = if text.starts_with("- ") {
            None
        } else {
            text.split_whitespace().next().map(|thread| {
                let n = self.replied.entry(thread.to_owned()).or_insert(0);
                *n += 1;
                (thread.to_owned(), *n)
            })
        };
        self.unclaimed.push_back(Line { text, reply_of });
    }

    /// Claims the oldest line (buffered or new) for which `matches` is true.
    fn claim(
        &mut self,
        matches: impl Fn(&Line) -> bool,
        within: Duration,
        waiting_for: &dyn std::fmt::Display,
    ) -> String {
        let deadline = Instant::now() + within;
        let mut checked = 0;
        loop {
            if let Some(i) = (checked..self.unclaimed.len()).find(|&i| matches(&self.unclaimed[i]))
            {
                return self.unclaimed.remove(i).unwrap().text;
            }
            checked = self.unclaimed.len();
            self.read_line(deadline, waiting_for);
        }
    }

    /// The oldest unclaimed reply line of `<thread> <command>` (e.g. of a command sent earlier
    /// with [`send`](Self::send)).
    pub fn reply(&mut self, thread: &str, command: &str, within: Duration) -> Reply {
        let prefix = format!("{thread} {command} ");
        let line = self.claim(
            |l| l.reply_of.is_some() && l.text.starts_with(&prefix),
            within,
            &format_args!("starting with {prefix:?}"),
        );
        Reply::parse(&line)
    }

    /// Sends a thread command and returns its own reply.
    pub fn call(&mut self, thread: &str, command_line: &str, within: Duration) -> Reply {
        let line = format!("{thread} {command_line}");
        let want = self.send_bytes(line.as_bytes()).expect("a thread command");
        let line = self.claim(
            |l| l.reply_of.as_ref() == Some(&want),
            within,
            &format_args!("replying to {line:?}"),
        );
        Reply::parse(&line)
    }

    /// Sends a global command and returns its `- <command> ...` line.
    pub fn global(&mut self, line: &str, within: Duration) -> String {
        self.send(line);
        let prefix = format!("- {} ", line.split_whitespace().next().unwrap());
        self.line_starting(&prefix, within)
    }

    /// Whether `<thread> <command>` has replied by now (a reply read and not claimed yet, or
    /// one waiting in the pipe), without waiting for one.
    pub fn has_replied(&mut self, thread: &str, command: &str) -> bool {
        while let Ok(text) = self.lines.try_recv() {
            self.take(text);
        }
        let prefix = format!("{thread} {command} ");
        self.unclaimed
            .iter()
            .any(|l| l.reply_of.is_some() && l.text.starts_with(&prefix))
    }

    /// Claims the oldest line that starts with `prefix`.
    pub fn line_starting(&mut self, prefix: &str, within: Duration) -> String {
        self.claim(
            |l| l.text.starts_with(prefix),
            within,
            &format_args!("starting with {prefix:?}"),
        )
    }

    /// Polls `<thread> <command_line>` until its value is `want`; returns that reply.
    pub fn poll_until(
        &mut self,
        thread: &str,
        command_line: &str,
        want: &str,
        within: Duration,
    ) -> Reply {
        let deadline = Instant::now() + within;
        loop {
            let r = self.call(thread, command_line, within);
            if r.value == want {
                return r;
            }
            assert!(
                Instant::now() < deadline,
                "{thread} {command_line} still {r:?} after {within:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis()
}

/// A fairness run on one hot lock: `owners` owners (threads `h1`, `h2`, ...) in each of `a` and
/// `b` loop `rounds` times on the lock `name` (see [`fleet_on_hot_lock`]; `a`'s commands go
/// out first). What it measures: [`Fairness`] (its module doc defines each figure).
pub fn hot_lock(
    a: &mut Peer,
    b: &mut Peer,
    name: &str,
    owners: usize,
    rounds: usize,
    hold_ms: u64,
) -> Fairness {
    let (holds, started) = holds_on_hot_lock(&mut [a, b], name, owners, rounds, hold_ms);
    Fairness::of(holds, started)
}

/// A fairness run of a fleet on one hot lock: `owners` owners (threads `h1`, `h2`, ...) in
/// each of `peers` loop `rounds` times on the lock `name`: lock, hold for `hold_ms`, unlock,
/// with no pause between an unlock and the next lock (each thread runs its next command at
/// once, as a Java thread looping over `lock(); try { work } finally { unlock(); }` does).
/// The peers' commands go out in their order (the start order); returns when every owner is
/// done. What it measures: [`FleetShares`] (the module doc of `fairness` defines each figure).
pub fn fleet_on_hot_lock(
    peers: &mut [&mut Peer],
    name: &str,
    owners: usize,
    rounds: usize,
    hold_ms: u64,
) -> FleetShares {
    let sides = peers.len();
    let (holds, started) = holds_on_hot_lock(peers, name, owners, rounds, hold_ms);
    FleetShares::of(holds, started, sides)
}

/// The holds of a run on one hot lock (see [`fleet_on_hot_lock`]), each side the index of its
/// peer, and when the owners were told to start.
fn holds_on_hot_lock(
    peers: &mut [&mut Peer],
    name: &str,
    owners: usize,
    rounds: usize,
    hold_ms: u64,
) -> (Vec<Hold>, u128) {
    for peer in peers.iter_mut() {
        let mut script = Vec::new();
        for _ in 0..rounds {
            for o in 1..=owners {
                script.push(format!("h{o} lock {name}"));
                script.push(format!("h{o} sleep {hold_ms}"));
                script.push(format!("h{o} unlock {name}"));
            }
        }
        // One write: every owner of this side starts at once.
        peer.send_lines(&script);
    }
    let started = now_ms();
    let all = (peers.len() * owners * rounds) as u64;
    let patience = Duration::from_millis(hold_ms * all * 4 + 20_000);
    let mut holds = Vec::new();
    for (side, peer) in peers.iter_mut().enumerate() {
        for o in 1..=owners {
            let thread = format!("h{o}");
            for _ in 0..rounds {
                let got = peer.reply(&thread, "lock", patience);
                assert!(got.ok, "{got:?}");
                let released = peer.reply(&thread, "unlock", patience);
                assert!(released.ok, "{released:?}");
                let worked = peer.reply(&thread, "sleep", patience);
                holds.push(Hold {
                    at: got.at,
                    released: released.at,
                    worked_until: worked.at,
                    side,
                    owner: o,
                });
            }
        }
    }
    (holds, started)
}
