//! `redisson-lock`: inspect, list, watch and force-unlock Redisson-layout locks (taken by Java
//! Redisson or by this crate). Build with `--features cli`.

mod inspect;

use std::{
    io::{BufRead, IsTerminal, Write},
    process::ExitCode,
    time::Duration,
};

use clap::{Parser, Subcommand};
use fred::{
    clients::Client as Redis,
    interfaces::ClientLike,
    types::{config::Config as FredConfig, scan::ScanType},
};
use futures::StreamExt;
use inspect::{CliError, Result, EXIT_ABORTED, EXIT_ERROR, EXIT_NOT_FOUND};

/// Inspect and manage Redisson-compatible distributed locks.
///
/// Exit codes: 0 success, 1 error (bad URL, connection, Redis), 2 bad usage, 3 lock not found,
/// 4 permission denied (ACL NOPERM or authentication), 5 aborted at the confirmation prompt.
#[derive(Parser, Debug)]
#[command(name = "redisson-lock", version)]
struct Cli {
    /// Redis URL: redis:// (one server), redis-cluster://host:port[?node=host:port...],
    /// redis-sentinel://host:26379?sentinelServiceName=MASTER[&node=...], and the TLS forms
    /// rediss://, rediss-cluster://, rediss-sentinel:// (with --tls-ca; `tls` feature).
    #[arg(long, env = "REDIS_URL", default_value = "redis://127.0.0.1:6379")]
    url: String,
    /// Key prefix of the application's name mapper (`Config::key_prefix`).
    #[arg(long, default_value = "")]
    prefix: String,
    /// PEM file of the CA that signed the server's certificate, for rediss:// URLs (default:
    /// the platform's roots). Needs a build with the `tls` feature.
    #[arg(long, env = "REDIS_TLS_CA", value_name = "FILE")]
    tls_ca: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Who holds a lock, since when, who is waiting.
    Inspect {
        /// The lock name (before the prefix).
        name: String,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Lists the lock hashes, and the semaphores and latches (integer strings), whose names
    /// match PATTERN (SCAN, never KEYS).
    List {
        /// A glob pattern of raw key names (with the prefix).
        #[arg(default_value = "*")]
        pattern: String,
    },
    /// Shows a lock, refreshed every interval, until interrupted.
    Watch {
        name: String,
        /// Refresh interval in milliseconds.
        #[arg(long, default_value_t = 1000)]
        interval_ms: u64,
        /// Stop after this many refreshes (default: run until interrupted).
        #[arg(long)]
        count: Option<u64>,
    },
    /// Deletes a lock whoever holds it and wakes its waiters.
    Unlock {
        name: String,
        /// Required: this breaks the lock of a live holder.
        #[arg(long)]
        force: bool,
        /// Do not ask for confirmation.
        #[arg(long)]
        yes: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start a runtime: {e}");
            return ExitCode::from(EXIT_ERROR as u8);
        }
    };
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("error: {}", f.message);
            ExitCode::from(f.code as u8)
        }
    }
}

/// The crate configuration the tool connects with: the name mapper's prefix, the CA for
/// `rediss://` URLs, and on a cluster unlock messages sent both ways (`SPUBLISH` and
/// `PUBLISH`), so a force-unlock wakes waiters of old and new Redisson versions alike.
fn crate_config(cli: &Cli) -> redisson_lock::Config {
    let mut config = redisson_lock::Config::default()
        .key_prefix(cli.prefix.clone())
        .sharded_subscription_mode(redisson_lock::ShardedSubscriptionMode::Both);
    if let Some(ca) = &cli.tls_ca {
        config = config.tls(redisson_lock::TlsSettings::new().ca_file(ca));
    }
    config
}

/// The connection the tool reads with: the URL checked and configured exactly as a
/// [`redisson_lock::Client`] would be (every scheme the crate supports; a TLS URL never
/// connects in plain text, and needs the `tls` feature).
fn fred_config(cli: &Cli) -> Result<FredConfig> {
    redisson_lock::cli_support::fred_config(&cli.url, &crate_config(cli))
        .map_err(|e| CliError::new(EXIT_ERROR, format!("invalid Redis URL or option: {e}")))
}

async fn run(cli: Cli) -> Result<()> {
    let config = fred_config(&cli)?;
    let redis = Redis::new(config, None, None, None);
    inspect::connect(&redis).await?;
    let result = command(&cli, &redis).await;
    let _ = redis.quit().await;
    result
}

async fn command(cli: &Cli, redis: &Redis) -> Result<()> {
    let raw = |name: &str| format!("{}{name}", cli.prefix);
    match &cli.command {
        Command::Inspect { name, json } => {
            let found = inspect::inspect(redis, &raw(name)).await?;
            if found.is_missing() {
                return Err(CliError::new(
                    EXIT_NOT_FOUND,
                    format!("no lock named '{}'", raw(name)),
                ));
            }
            if *json {
                println!("{}", inspect::render_json(&found));
            } else {
                print!("{}", inspect::render(&found));
            }
            Ok(())
        }
        Command::List { pattern } => list(redis, pattern).await,
        Command::Watch {
            name,
            interval_ms,
            count,
        } => {
            let clear = std::io::stdout().is_terminal();
            let mut n = 0;
            loop {
                let found = inspect::inspect(redis, &raw(name)).await?;
                if clear {
                    print!("\x1b[2J\x1b[H");
                }
                print!("{}", inspect::render(&found));
                println!("--");
                let _ = std::io::stdout().flush();
                n += 1;
                if count.is_some_and(|c| n >= c) {
                    return Ok(());
                }
                tokio::time::sleep(Duration::from_millis(*interval_ms)).await;
            }
        }
        Command::Unlock { name, force, yes } => {
            if !force {
                return Err(CliError::new(
                    inspect::EXIT_USAGE,
                    "unlock breaks the lock of its holder: pass --force to do it",
                ));
            }
            unlock(cli, redis, name, *yes).await
        }
    }
}

/// Every key of `kind` whose name matches `pattern` (SCAN of every primary on a cluster),
/// sorted.
async fn scan(redis: &Redis, pattern: &str, kind: ScanType) -> Result<Vec<String>> {
    let stream = if redis.is_clustered() {
        redis
            .scan_cluster_buffered(pattern, Some(1000), Some(kind))
            .boxed()
    } else {
        redis.scan_buffered(pattern, Some(1000), Some(kind)).boxed()
    };
    let mut keys = Vec::new();
    let mut stream = stream;
    while let Some(key) = stream.next().await {
        let key = key.map_err(CliError::redis)?;
        if let Some(k) = key.as_str() {
            keys.push(k.to_owned());
        }
    }
    keys.sort();
    keys.dedup();
    Ok(keys)
}

async fn list(redis: &Redis, pattern: &str) -> Result<()> {
    for key in scan(redis, pattern, ScanType::Hash).await? {
        if !inspect::looks_like_lock(redis, &key).await? {
            continue;
        }
        let i = inspect::inspect(redis, &key).await?;
        let ttl = i.ttl_ms.map_or("-".to_owned(), |t| format!("{t}ms"));
        println!(
            "{key}\t{}\tholders={}\tqueue={}\tttl={ttl}",
            i.kind,
            i.holders.len(),
            i.queue.len()
        );
    }
    // Semaphores and latches: integer strings (the crate's and Redisson's own keys, such as
    // fenced-lock tokens, start with `redisson_` and are left out).
    for key in scan(redis, pattern, ScanType::String).await? {
        if key.starts_with("redisson_") {
            continue;
        }
        let i = inspect::inspect(redis, &key).await;
        let Ok(i) = i else { continue };
        if !i.is_synchronizer() {
            continue;
        }
        let ttl = i.ttl_ms.map_or("-".to_owned(), |t| format!("{t}ms"));
        println!(
            "{key}\t{}\tvalue={}\tacquired={}\tttl={ttl}",
            i.kind,
            i.value.unwrap_or(0),
            i.permits.len()
        );
    }
    Ok(())
}

async fn unlock(cli: &Cli, redis: &Redis, name: &str, yes: bool) -> Result<()> {
    let raw = format!("{}{name}", cli.prefix);
    let found = inspect::inspect(redis, &raw).await?;
    if found.is_synchronizer() {
        return Err(CliError::new(
            inspect::EXIT_USAGE,
            format!("'{raw}' is a {}, not a lock: nothing to unlock", found.kind),
        ));
    }
    if !found.exists {
        return Err(CliError::new(
            EXIT_NOT_FOUND,
            format!("lock '{raw}' is not held"),
        ));
    }
    if !yes {
        eprint!(
            "force-unlock '{raw}' ({}, {} holder(s), {} waiter(s))? [y/N] ",
            found.kind,
            found.holders.len(),
            found.queue.len()
        );
        let _ = std::io::stderr().flush();
        let mut answer = String::new();
        let _ = std::io::stdin().lock().read_line(&mut answer);
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            return Err(CliError::new(EXIT_ABORTED, "aborted"));
        }
    }
    // The crate's own force-unlock of the right kind: the same scripts and unlock messages a
    // Java client sends, so waiters on either side wake.
    let client = redisson_lock::Client::connect(&cli.url, crate_config(cli))
        .await
        .map_err(|e| match e.kind() {
            redisson_lock::ErrorKind::PermissionDenied => {
                CliError::new(inspect::EXIT_DENIED, format!("{e:#}"))
            }
            _ => CliError::new(EXIT_ERROR, format!("{e:#}")),
        })?;
    let done = match found.kind {
        "fair" => client.get_fair_lock(name).force_unlock().await,
        "read-write" => {
            let rw = client.get_read_write_lock(name);
            if found.mode.as_deref() == Some("write") {
                rw.write_lock().force_unlock().await
            } else {
                rw.read_lock().force_unlock().await
            }
        }
        _ => client.get_lock(name).force_unlock().await,
    };
    client.shutdown().await;
    match done {
        Ok(true) => {
            println!("unlocked '{raw}'");
            Ok(())
        }
        Ok(false) => Err(CliError::new(
            EXIT_NOT_FOUND,
            format!("lock '{raw}' was released meanwhile"),
        )),
        Err(e) if e.kind() == redisson_lock::ErrorKind::PermissionDenied => {
            Err(CliError::new(inspect::EXIT_DENIED, format!("{e:#}")))
        }
        Err(e) => Err(CliError::new(EXIT_ERROR, format!("{e:#}"))),
    }
}
