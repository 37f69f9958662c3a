//! Test rig: throwaway `redis-server` processes on free loopback ports, stopped by PID.

use std::{
    io::{Read, Write},
    net::{TcpListener, TcpStream},
    path::PathBuf,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// One `redis-server` process owned by the test. Killed (by PID) on drop.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: PathBuf,
    extra: Vec<String>,
}

/// A loopback port that was free a moment ago (bound to port 0, then released).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind an ephemeral port");
    l.local_addr().unwrap().port()
}

/// Whether a Redis server answers `PING` on `127.0.0.1:<port>`.
pub fn ping(port: u16) -> bool {
    let Ok(mut s) = TcpStream::connect_timeout(
        &format!("127.0.0.1:{port}").parse().unwrap(),
        Duration::from_millis(200),
    ) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

impl RedisServer {
    /// Starts a server with persistence off on a free loopback port (never 6379).
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// Starts a server with extra `redis-server` arguments (e.g. `["--notify-keyspace-events", "Egx"]`).
    pub fn start_with(extra: &[&str]) -> Self {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        sweep_stale_dirs();
        for _ in 0..20 {
            let port = free_port();
            if port == 6379 {
                continue;
            }
            let dir = std::env::temp_dir()
                .join(format!("redisson-lock-test-{}-{port}", std::process::id()));
            let _ = std::fs::create_dir_all(&dir);
            let mut server = RedisServer {
                child: None,
                port,
                dir,
                extra: extra.clone(),
            };
            if server.spawn() {
                return server;
            }
        }
        panic!("could not start redis-server (is it installed? run scripts/test.sh)");
    }

    fn spawn(&mut self) -> bool {
        let mut cmd = Command::new("redis-server");
        cmd.args(["--port", &self.port.to_string()])
            .args(["--bind", "127.0.0.1"])
            .args(["--save", ""])
            .args(["--appendonly", "no"])
            .args(["--daemonize", "no"])
            .args(["--protected-mode", "no"])
            .args(["--enable-debug-command", "local"])
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.extra)
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(dir) = fixture_log_dir() {
            // Appended to across restarts: one file per port.
            cmd.arg("--logfile")
                .arg(dir.join(format!("redis-{}.log", self.port)));
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => panic!("cannot run redis-server: {e} (run scripts/test.sh to install it)"),
        };
        let port = self.port;
        if !came_up(&mut child, port, || ping(port)) {
            return false; // e.g. port taken in the meantime
        }
        self.child = Some(child);
        true
    }

    /// `redis://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The server's working directory (its AOF and RDB files).
    pub fn dir(&self) -> &std::path::Path {
        &self.dir
    }

    /// The server's PID.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// Kills the process (SIGKILL, by PID): data is lost, as in a crash.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same port, from what its directory holds: its AOF
    /// (with `--appendonly yes`), or the `dump.rdb` that a replica writes at each full sync
    /// even with saving off (so a replica restarted this way comes back with the data of its
    /// last full sync). Without either, empty. [`restart_empty`](Self::restart_empty) drops both.
    pub fn restart(&mut self) {
        self.kill();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.spawn() {
            assert!(Instant::now() < deadline, "redis-server did not restart");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl RedisServer {
    /// Kills the process and starts it again on the same port without any data: its AOF and
    /// its `dump.rdb` (a replica's last full sync) removed first, as a disk lost with the crash.
    pub fn restart_empty(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(self.dir.join("appendonlydir"));
        let _ = std::fs::remove_file(self.dir.join("dump.rdb"));
        self.restart();
    }
}

/// The prefixes of every directory the rigs make under the temp dir, each followed by the
/// PID of the test process that made it (`redisson-lock-<rig>-<pid>-...`).
const RIG_DIRS: [&str; 4] = [
    "redisson-lock-test-",
    "redisson-lock-sentinel-",
    "redisson-lock-tls-",
    "redisson-lock-cluster-",
];

/// Removes the directories the rigs made for test processes that are gone (a deployment
/// shared for a whole test binary is never dropped, and a killed test drops nothing): once
/// per process, before its first server, sentinel set or certificates.
pub(crate) fn sweep_stale_dirs() {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(|| sweep_stale_dirs_in(&std::env::temp_dir()));
}

/// [`sweep_stale_dirs`] over `root`: every rig directory whose process is not alive goes.
fn sweep_stale_dirs_in(root: &std::path::Path) {
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let Some(rest) = RIG_DIRS.iter().find_map(|p| name.strip_prefix(p)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `REDIS_FIXTURE_LOGS=<dir>`: every server and sentinel a fixture starts logs to
/// `<dir>/redis-<port>.log` / `<dir>/sentinel-<port>.log` (for analysing a chaos run or a
/// failing test); unset, they log nowhere.
pub fn fixture_log_dir() -> Option<std::path::PathBuf> {
    let dir = std::path::PathBuf::from(std::env::var_os("REDIS_FIXTURE_LOGS")?);
    std::fs::create_dir_all(&dir).ok()?;
    Some(dir)
}

/// Waits up to 10 s for a freshly spawned server or sentinel to listen on `port` itself and be
/// `up` (answer PING, accept a connection). `false` when it exited first (e.g. its port was
/// taken meanwhile) or never came up; then it has been stopped and reaped. Every rig starts its
/// processes through this.
///
/// `up` alone is not enough: the suite runs several test binaries at once, each picking free
/// ports, so another binary's server can take the port between [`free_port`] and the spawn. Our
/// server then fails to bind and exits, but until it has, `up` is answered by the other
/// binary's server: a rig that took that answer as its own went on with someone else's server
/// (CI saw a cluster's `redis-cli --cluster create` find a node "not empty", another test's
/// cluster node, and earlier a new cluster whose node went silent). So the listening socket on
/// `port` must be one of the child's own file descriptors first.
pub fn came_up(child: &mut Child, port: u16, mut up: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if listens(child.id(), port) && up() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
    false
}

/// Whether process `pid` holds the socket listening on `127.0.0.1:<port>` (Linux: the socket's
/// inode in `/proc/net/tcp`, among the links of `/proc/<pid>/fd`).
pub fn listens(pid: u32, port: u16) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/net/tcp") else {
        return false;
    };
    let Some(inode) = listening_inode(&table, port) else {
        return false;
    };
    let want = format!("socket:[{inode}]");
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == want.as_str())
    })
}

/// The inode of the socket listening on `127.0.0.1:<port>` in a `/proc/net/tcp` table
/// (`sl local_address rem_address st ... inode`, addresses in hex, state `0A` = LISTEN).
fn listening_inode(table: &str, port: u16) -> Option<u64> {
    let local = format!("0100007F:{port:04X}");
    table.lines().skip(1).find_map(|line| {
        let f: Vec<&str> = line.split_whitespace().collect();
        (f.len() > 9 && f[1] == local && f[3] == "0A")
            .then(|| f[9].parse().ok())
            .flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listening socket is found among its own process's descriptors only: this process
    /// listens on the port; another process (a child that holds no socket) does not, and
    /// nobody does once the listener is closed.
    #[test]
    fn a_port_is_owned_by_the_process_that_listens_on_it() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(listens(std::process::id(), port));
        let mut other = Command::new("sleep").arg("5").spawn().unwrap();
        assert!(!listens(other.id(), port));
        let _ = other.kill();
        let _ = other.wait();
        drop(listener);
        assert!(!listens(std::process::id(), port));
    }

    /// The race CI met: another process listens on the port a rig picked, and answers the
    /// rig's readiness check. The rig's own server, which cannot bind, is not taken for up.
    #[test]
    fn a_server_whose_port_another_process_holds_did_not_come_up() {
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = other.local_addr().unwrap().port();
        let dir = std::env::temp_dir().join(format!("came-up-check-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .arg("--dir")
            .arg(&dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (scripts/test.sh installs it)");
        // `up` as the other process's server would answer it: at once.
        assert!(!came_up(&mut child, port, || true));
        assert!(child.try_wait().unwrap().is_some(), "stopped and reaped");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The LISTEN line of the port is picked, not a connection from or to it.
    #[test]
    fn the_listening_inode_is_read_from_the_tcp_table() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000     0        0 111 1 0 20 4 30 10 -1
   1: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 222 1 0 100 0 0 10 0
   2: 0100007F:1F91 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 333 1 0 100 0 0 10 0";
        assert_eq!(listening_inode(table, 8080), Some(222));
        assert_eq!(listening_inode(table, 8081), Some(333));
        assert_eq!(listening_inode(table, 8082), None);
    }

    /// A rig's directory of a process that is gone is removed; one of a live process (this
    /// one), and anything that is not a rig's, stay.
    #[test]
    fn stale_rig_dirs_of_dead_processes_are_swept() {
        let root = std::env::temp_dir().join(format!("sweep-check-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        // PID 4194304 is above Linux's highest (pid_max is at most 2^22).
        let dead = ["test", "sentinel", "tls", "cluster"]
            .map(|rig| root.join(format!("redisson-lock-{rig}-4194304-1")));
        let live = root.join(format!("redisson-lock-tls-{}-1", std::process::id()));
        let other = root.join("redisson-lock-chaos-4194304");
        for d in dead.iter().chain([&live, &other]) {
            std::fs::create_dir_all(d.join("inside")).unwrap();
        }
        sweep_stale_dirs_in(&root);
        for d in &dead {
            assert!(!d.exists(), "{d:?} swept");
        }
        assert!(live.exists() && other.exists());
        std::fs::remove_dir_all(&root).unwrap();
    }
}
