//! The test rig's restarts as the nemesis uses them: "restarted empty" must be empty. A
//! replica writes `dump.rdb` at every full sync even with saving off, and a plain restart loads
//! it: a Sentinel 1 + 1 run had a killed master come back with the data of its last full sync
//! (8 s old), and a second failover a second later made it the master, handing out fencing
//! tokens again with replica sync on.

use std::{
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use redisson_lock_test_kit::RedisServer;

fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn a_replica_restarted_empty_does_not_load_its_last_full_sync() {
    let master = RedisServer::start_with(&["--repl-diskless-sync-delay", "0"]);
    assert_eq!(cli(master.port(), &["SET", "k", "v"]), "OK");
    let mport = master.port().to_string();
    let mut replica = RedisServer::start_with(&["--replicaof", "127.0.0.1", &mport]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while cli(replica.port(), &["GET", "k"]) != "v" {
        assert!(Instant::now() < deadline, "the replica never synced");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        replica.dir().join("dump.rdb").exists(),
        "the full sync's RDB"
    );
    // The master gone, nothing can sync the replica again: what it has after a restart is what
    // it loaded from its own directory.
    drop(master);
    replica.restart();
    assert_eq!(
        cli(replica.port(), &["GET", "k"]),
        "v",
        "a plain restart loads the full sync's RDB"
    );
    replica.restart_empty();
    assert_eq!(cli(replica.port(), &["DBSIZE"]), "0");
}
