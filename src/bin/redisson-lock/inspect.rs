//! Reading a lock's state from Redis in the layout Redisson (and this crate) writes, and
//! printing it. Everything here is read-only.

use std::fmt::Write as _;

use fred::{
    clients::Client as Redis,
    interfaces::{ClientLike, ClusterInterface},
    types::{ClusterHash, CustomCommand, Value},
};

/// A failure of the tool, with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    pub code: i32,
    pub message: String,
}

/// Exit codes (documented in the README and `--help`).
pub const EXIT_ERROR: i32 = 1;
pub const EXIT_USAGE: i32 = 2;
pub const EXIT_NOT_FOUND: i32 = 3;
pub const EXIT_DENIED: i32 = 4;
pub const EXIT_ABORTED: i32 = 5;

impl Failure {
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    /// A Redis error: NOPERM (and authentication failures) get their own exit code.
    pub fn redis(err: fred::error::Error) -> Self {
        let details = err.details().to_owned();
        if details.contains("NOPERM") || matches!(err.kind(), fred::error::ErrorKind::Auth) {
            Self::new(EXIT_DENIED, format!("permission denied: {details}"))
        } else {
            Self::new(EXIT_ERROR, format!("redis error: {details}"))
        }
    }
}

pub type Result<T> = std::result::Result<T, Failure>;

/// Runs one command and returns its raw reply.
pub async fn cmd(redis: &Redis, name: &'static str, args: Vec<Value>) -> Result<Value> {
    let hash = match args.first() {
        Some(_) => ClusterHash::FirstKey,
        None => ClusterHash::Random,
    };
    redis
        .custom(CustomCommand::new_static(name, hash, false), args)
        .await
        .map_err(Failure::redis)
}

/// The brace rule of every derived name: `{N}`, or `N` itself when it contains a `{`.
pub fn braced(name: &str) -> String {
    if name.contains('{') {
        name.to_owned()
    } else {
        format!("{{{name}}}")
    }
}

fn text(v: &Value) -> String {
    v.as_string().unwrap_or_default()
}

/// One holder field `<client uuid>:<thread id>` (plus `:write` for a write hold).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub client_id: String,
    pub thread_id: String,
    pub count: i64,
    /// `Some("read"|"write")` for a read-write lock.
    pub mode: Option<&'static str>,
    /// Remaining TTLs (ms) of a reader's per-hold timeout keys, hold 1 first.
    pub reader_ttls_ms: Vec<i64>,
    pub field: String,
}

/// Splits an owner field; `None` for a field that is not an owner (e.g. `mode`).
pub fn parse_field(field: &str) -> Option<(String, String, bool)> {
    let (base, write) = match field.strip_suffix(":write") {
        Some(base) => (base, true),
        None => (field, false),
    };
    let (client, thread) = base.rsplit_once(':')?;
    if client.is_empty() || thread.is_empty() {
        return None;
    }
    Some((client.to_owned(), thread.to_owned(), write))
}

/// A queued fair-lock waiter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Waiter {
    pub client_id: String,
    pub thread_id: String,
    /// Epoch milliseconds after which the waiter loses its place.
    pub deadline_ms: Option<i64>,
}

/// An acquired permit of a permit-expirable semaphore.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Permit {
    /// The id as Redisson shows it: 32 lowercase hex characters of the 16 stored bytes.
    pub id: String,
    /// Epoch milliseconds at which it expires (`None`: acquired without a lease).
    pub expires_ms: Option<i64>,
}

/// The leader of an election (a fenced lock held through `Client::get_election`, or by a
/// Java `RFencedLock`): its owner field, its term (the token counter: the fencing token of the
/// latest acquisition, the holder's) and the value it proclaimed in
/// `redisson_lock_leader:{N}` (this crate's key; absent for a Java leader).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leader {
    pub holder: String,
    pub client_id: String,
    pub thread_id: String,
    pub term: Option<i64>,
    pub value: Option<String>,
}

/// The score of a permit acquired without a lease (sync protocol §3.1).
const NO_LEASE: i64 = 922_337_203_685_477;

/// What a lock (or a synchronizer) looks like in Redis right now.
/// One value of a group multi-lock (Redisson `getMultiLock(group, values)`): its hash field
/// (the value's HighwayHash in Base64; values themselves are not stored) and its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupValue {
    pub field: String,
    pub client_id: String,
    pub thread_id: String,
    pub count: i64,
    /// Epoch ms (the holder's clock) when the hold ends unless renewed.
    pub deadline_ms: Option<i64>,
}

/// `true` for a group multi-lock's field: a value field (22 Base64 characters, no `:`) or a
/// holder's `<value>:<owner>:expire_time` / `:lock_count`.
fn is_group_field(field: &str) -> bool {
    let value_field = |f: &str| {
        f.len() == 22
            && f.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
    };
    if value_field(field) {
        return true;
    }
    let Some(rest) = field
        .strip_suffix(":expire_time")
        .or_else(|| field.strip_suffix(":lock_count"))
    else {
        return false;
    };
    rest.split_once(':')
        .is_some_and(|(v, owner)| value_field(v) && parse_field(owner).is_some())
}

#[derive(Debug, Clone, Default)]
pub struct Inspection {
    pub name: String,
    pub kind: &'static str,
    pub exists: bool,
    pub ttl_ms: Option<i64>,
    pub mode: Option<String>,
    pub holders: Vec<Holder>,
    pub queue: Vec<Waiter>,
    pub token: Option<i64>,
    /// (channel, subscribers) for the lock's unlock channel(s).
    pub channels: Vec<(String, i64)>,
    /// A semaphore's available permits or a latch's count (the string key's value).
    pub value: Option<i64>,
    /// A permit-expirable semaphore's acquired permits, earliest expiry first.
    pub permits: Vec<Permit>,
    /// The held values of a group multi-lock (kind `group`).
    pub values: Vec<GroupValue>,
    /// Who leads, for a held fenced lock (an election's wire).
    pub leader: Option<Leader>,
    /// This machine's clock (epoch ms) when the inspection read the permits' leases.
    pub now_ms: i64,
}

impl Inspection {
    /// `true` when nothing of the lock exists (no hash, queue or token).
    pub fn is_missing(&self) -> bool {
        !self.exists && self.queue.is_empty() && self.token.is_none() && self.permits.is_empty()
    }

    /// `true` for a semaphore or a count-down latch (a counter, not a lock hash).
    pub fn is_synchronizer(&self) -> bool {
        matches!(
            self.kind,
            "semaphore" | "permit-expirable-semaphore" | "count-down-latch" | "semaphore-or-latch"
        )
    }

    pub fn subscribers(&self) -> i64 {
        self.channels.iter().map(|(_, n)| n).sum()
    }
}

/// Reads everything about the lock whose raw name is `name`.
pub async fn inspect(redis: &Redis, name: &str) -> Result<Inspection> {
    let b = braced(name);
    let key_type = text(&cmd(redis, "TYPE", vec![name.into()]).await?);
    let mut out = Inspection {
        name: name.to_owned(),
        kind: "reentrant",
        ..Default::default()
    };
    if key_type == "string" || key_type == "none" {
        if let Some(found) = inspect_synchronizer(redis, name, &key_type).await? {
            return Ok(found);
        }
    }
    match key_type.as_str() {
        "none" => {}
        "hash" => out.exists = true,
        other => {
            return Err(Failure::new(
                EXIT_ERROR,
                format!(
                    "key '{name}' is a {other}, not a lock (locks are hashes; semaphores and \
                     latches are integer strings)"
                ),
            ))
        }
    }
    if out.exists {
        let pttl = cmd(redis, "PTTL", vec![name.into()])
            .await?
            .as_i64()
            .unwrap_or(-2);
        out.ttl_ms = (pttl >= 0).then_some(pttl);
        let fields = cmd(redis, "HGETALL", vec![name.into()]).await?.into_array();
        let all: Vec<(String, String)> = fields
            .chunks(2)
            .map(|p| (text(&p[0]), p.get(1).map(text).unwrap_or_default()))
            .collect();
        if !all.is_empty() && all.iter().all(|(f, _)| is_group_field(f)) {
            group(&mut out, &all);
            out.channels = subscribers(redis, &[format!("redisson_lock__channel:{b}")]).await?;
            return Ok(out);
        }
        for pair in fields.chunks(2) {
            let (field, value) = (text(&pair[0]), pair.get(1).map(text).unwrap_or_default());
            if field == "mode" {
                out.mode = Some(value);
                continue;
            }
            if let Some((client_id, thread_id, write)) = parse_field(&field) {
                out.holders.push(Holder {
                    client_id,
                    thread_id,
                    count: value.parse().unwrap_or(0),
                    mode: None,
                    reader_ttls_ms: Vec::new(),
                    field,
                });
                if write {
                    out.holders.last_mut().unwrap().mode = Some("write");
                }
            }
        }
        out.holders.sort_by(|a, b| a.field.cmp(&b.field));
    }
    // Fair queue and deadlines.
    let queue_key = format!("redisson_lock_queue:{b}");
    let timeout_key = format!("redisson_lock_timeout:{b}");
    let queue: Vec<String> = cmd(
        redis,
        "LRANGE",
        vec![queue_key.into(), 0.into(), (-1).into()],
    )
    .await?
    .into_array()
    .iter()
    .map(text)
    .collect();
    let scores = cmd(
        redis,
        "ZRANGE",
        vec![
            timeout_key.clone().into(),
            0.into(),
            (-1).into(),
            "WITHSCORES".into(),
        ],
    )
    .await?
    .into_array();
    let deadlines: std::collections::HashMap<String, i64> = scores
        .chunks(2)
        .filter_map(|p| {
            let score = p.get(1)?.as_string()?.parse::<f64>().ok()? as i64;
            Some((text(&p[0]), score))
        })
        .collect();
    let is_fair = !queue.is_empty() || !deadlines.is_empty();
    for field in &queue {
        if let Some((client_id, thread_id, _)) = parse_field(field) {
            out.queue.push(Waiter {
                client_id,
                thread_id,
                deadline_ms: deadlines.get(field).copied(),
            });
        }
    }
    // Fenced token.
    let token = cmd(
        redis,
        "GET",
        vec![format!("redisson_lock_token:{b}").into()],
    )
    .await?;
    out.token = token.as_string().and_then(|t| t.parse().ok());

    let mut channels = Vec::new();
    if out.mode.is_some() {
        out.kind = "read-write";
        let mode = out.mode.clone().unwrap_or_default();
        for h in &mut out.holders {
            if h.mode.is_none() {
                h.mode = Some("read");
                for k in 1..=h.count.max(0) {
                    let key = format!("{b}:{}:rwlock_timeout:{k}", h.field);
                    let ttl = cmd(redis, "PTTL", vec![key.into()]).await?.as_i64();
                    h.reader_ttls_ms.push(ttl.unwrap_or(-2));
                }
            }
        }
        let _ = mode;
        channels.push(format!("redisson_rwlock:{b}"));
    } else if is_fair {
        out.kind = "fair";
        for field in &queue {
            channels.push(format!("redisson_lock__channel:{b}:{field}"));
        }
    } else {
        if out.token.is_some() {
            out.kind = "fenced";
            out.leader = leader(redis, &b, &out).await?;
        }
        channels.push(format!("redisson_lock__channel:{b}"));
    }
    if !out.exists && !is_fair && out.token.is_none() {
        out.kind = "none";
    }
    out.channels = subscribers(redis, &channels).await?;
    Ok(out)
}

/// The leader of a held fenced lock, with the value it proclaimed (only if the proclamation
/// names the current holder: an older leader's is stale).
async fn leader(redis: &Redis, braced: &str, out: &Inspection) -> Result<Option<Leader>> {
    let Some(h) = out.holders.first() else {
        return Ok(None);
    };
    let proclaimed = cmd(
        redis,
        "HGETALL",
        vec![format!("redisson_lock_leader:{braced}").into()],
    )
    .await?;
    let fields: Vec<String> = proclaimed.into_array().iter().map(text).collect();
    let get = |name: &str| {
        fields
            .chunks(2)
            .find(|p| p.len() == 2 && p[0] == name)
            .map(|p| p[1].clone())
    };
    let value = (get("holder").as_deref() == Some(h.field.as_str()))
        .then(|| get("value"))
        .flatten();
    Ok(Some(Leader {
        holder: h.field.clone(),
        client_id: h.client_id.clone(),
        thread_id: h.thread_id.clone(),
        term: out.token,
        value,
    }))
}

/// A semaphore, a permit-expirable semaphore or a count-down latch named `name` (sync protocol
/// §2–4): an integer string `N`, and for the permit-expirable semaphore the sorted set
/// `{N}:timeout`. `None` when neither is there (not a synchronizer). A semaphore and a latch
/// look alike in Redis: the waiters on their channels tell them apart when there are any.
async fn inspect_synchronizer(
    redis: &Redis,
    name: &str,
    key_type: &str,
) -> Result<Option<Inspection>> {
    let b = braced(name);
    let timeouts = format!("{b}:timeout");
    let value = match key_type {
        "string" => match text(&cmd(redis, "GET", vec![name.into()]).await?).parse::<i64>() {
            Ok(v) => Some(v),
            Err(_) => return Ok(None),
        },
        _ => None,
    };
    let expirable = text(&cmd(redis, "TYPE", vec![timeouts.as_str().into()]).await?) == "zset";
    if value.is_none() && !expirable {
        return Ok(None);
    }
    let mut out = Inspection {
        name: name.to_owned(),
        exists: value.is_some(),
        value,
        ..Default::default()
    };
    if out.exists {
        let pttl = cmd(redis, "PTTL", vec![name.into()])
            .await?
            .as_i64()
            .unwrap_or(-2);
        out.ttl_ms = (pttl >= 0).then_some(pttl);
    }
    let semaphore_channel = format!("redisson_sc:{b}");
    let latch_channel = format!("redisson_countdownlatch__channel__{{{name}}}");
    if expirable {
        out.kind = "permit-expirable-semaphore";
        out.now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let scores = cmd(
            redis,
            "ZRANGE",
            vec![timeouts.into(), 0.into(), (-1).into(), "WITHSCORES".into()],
        )
        .await?
        .into_array();
        for pair in scores.chunks(2) {
            let id: String = pair[0]
                .as_bytes()
                .unwrap_or_default()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();
            let score = pair
                .get(1)
                .and_then(Value::as_string)
                .and_then(|s| s.parse::<f64>().ok())
                .map(|f| f as i64);
            out.permits.push(Permit {
                id,
                expires_ms: score.filter(|s| *s != NO_LEASE),
            });
        }
        out.channels = subscribers(redis, &[semaphore_channel]).await?;
        return Ok(Some(out));
    }
    // The latch channel's hash tag may differ from N's (a name with `}`): counted apart.
    let mut channels = subscribers(redis, std::slice::from_ref(&semaphore_channel)).await?;
    channels.extend(subscribers(redis, std::slice::from_ref(&latch_channel)).await?);
    let (semaphore, latch) = (channels[0].1, channels[1].1);
    out.kind = match (semaphore > 0, latch > 0) {
        (true, false) => "semaphore",
        (false, true) => "count-down-latch",
        _ => "semaphore-or-latch",
    };
    out.channels = match out.kind {
        "semaphore" => vec![channels[0].clone()],
        "count-down-latch" => vec![channels[1].clone()],
        _ => channels,
    };
    Ok(Some(out))
}

/// Fills in a group multi-lock's values and holders (distinct owners, each with the lowest
/// count over its values) from its hash fields.
fn group(out: &mut Inspection, fields: &[(String, String)]) {
    out.kind = "group";
    let get = |f: &str| fields.iter().find(|(k, _)| k == f).map(|(_, v)| v.as_str());
    for (field, owner) in fields {
        if field.contains(':') {
            continue;
        }
        let Some((client_id, thread_id, _)) = parse_field(owner) else {
            continue;
        };
        out.values.push(GroupValue {
            field: field.clone(),
            client_id,
            thread_id,
            count: get(&format!("{field}:{owner}:lock_count"))
                .and_then(|c| c.parse().ok())
                .unwrap_or(0),
            deadline_ms: get(&format!("{field}:{owner}:expire_time")).and_then(|d| d.parse().ok()),
        });
    }
    out.values.sort_by(|a, b| a.field.cmp(&b.field));
    for v in &out.values {
        let owner = format!("{}:{}", v.client_id, v.thread_id);
        match out.holders.iter_mut().find(|h| h.field == owner) {
            Some(h) => h.count = h.count.min(v.count),
            None => out.holders.push(Holder {
                client_id: v.client_id.clone(),
                thread_id: v.thread_id.clone(),
                count: v.count,
                mode: None,
                reader_ttls_ms: Vec::new(),
                field: owner,
            }),
        }
    }
    out.holders.sort_by(|a, b| a.field.cmp(&b.field));
}

/// Subscribers of each channel. On a cluster a channel's listeners may be sharded
/// (`SSUBSCRIBE`, counted by `PUBSUB SHARDNUMSUB` on the node that owns the channel's slot) or
/// classic (`SUBSCRIBE`, counted by `PUBSUB NUMSUB` on each node separately): both are added up,
/// over every primary.
async fn subscribers(redis: &Redis, channels: &[String]) -> Result<Vec<(String, i64)>> {
    if channels.is_empty() {
        return Ok(Vec::new());
    }
    let args = |sub: &'static str| {
        let mut args: Vec<Value> = vec![sub.into()];
        args.extend(channels.iter().map(|c| Value::from(c.as_str())));
        args
    };
    let counts = |reply: Value| -> Vec<i64> {
        reply
            .into_array()
            .chunks(2)
            .map(|pair| pair.get(1).and_then(Value::as_i64).unwrap_or(0))
            .collect()
    };
    let mut total = vec![0; channels.len()];
    let mut add = |n: Vec<i64>| {
        for (t, n) in total.iter_mut().zip(n) {
            *t += n;
        }
    };
    if redis.is_clustered() {
        // Every channel of one lock carries the lock's hash tag: one slot, one owner. (fred
        // routes a custom command by a `Custom` slot only; other hashers fall back to the
        // first argument, here the sub-command.)
        let slot = fred::util::redis_keyslot(channels[0].as_bytes());
        let sharded = CustomCommand::new_static("PUBSUB", ClusterHash::Custom(slot), false);
        let reply = redis
            .custom(sharded, args("SHARDNUMSUB"))
            .await
            .map_err(Failure::redis)?;
        add(counts(reply));
        let primaries = redis
            .cached_cluster_state()
            .map(|state| state.unique_primary_nodes())
            .unwrap_or_default();
        for node in primaries {
            let classic = CustomCommand::new_static("PUBSUB", ClusterHash::Random, false);
            let reply = redis
                .with_cluster_node(node)
                .custom(classic, args("NUMSUB"))
                .await
                .map_err(Failure::redis)?;
            add(counts(reply));
        }
    } else {
        add(counts(cmd(redis, "PUBSUB", args("NUMSUB")).await?));
    }
    Ok(channels.iter().cloned().zip(total).collect())
}

/// The human-readable report of a semaphore or a latch.
fn render_synchronizer(i: &Inspection) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "name:    {}", i.name);
    let _ = writeln!(s, "kind:    {}", i.kind);
    let what = match i.kind {
        "count-down-latch" => "count:  ",
        "semaphore-or-latch" => "value:  ",
        _ => "permits:",
    };
    match i.value {
        Some(v) => {
            let _ = writeln!(s, "{what} {v}");
        }
        None => {
            let _ = writeln!(s, "{what} 0 (no key)");
        }
    }
    let ttl = match (i.exists, i.ttl_ms) {
        (false, _) => "-".to_owned(),
        (true, Some(ms)) => format!("{ms} ms"),
        (true, None) => "no expiry".to_owned(),
    };
    let _ = writeln!(s, "ttl:     {ttl}");
    if i.kind == "permit-expirable-semaphore" {
        let _ = writeln!(s, "acquired: {}", i.permits.len());
        for p in &i.permits {
            let expires = p.expires_ms.map_or("never".to_owned(), |e| {
                format!("{e} (epoch ms, lease left {} ms)", e - i.now_ms)
            });
            let _ = writeln!(s, "  {} expires {expires}", p.id);
        }
    }
    let _ = writeln!(s, "subscribers: {}", i.subscribers());
    for (c, n) in &i.channels {
        let _ = writeln!(s, "  {c}: {n}");
    }
    s
}

/// The human-readable report.
pub fn render(i: &Inspection) -> String {
    if i.is_synchronizer() {
        return render_synchronizer(i);
    }
    let mut s = String::new();
    let _ = writeln!(s, "lock:    {}", i.name);
    let _ = writeln!(s, "kind:    {}", i.kind);
    let ttl = match (i.exists, i.ttl_ms) {
        (false, _) => "not held".to_owned(),
        (true, Some(ms)) => format!("{ms} ms"),
        (true, None) => "no expiry".to_owned(),
    };
    let _ = writeln!(s, "ttl:     {ttl}");
    if let Some(mode) = &i.mode {
        let _ = writeln!(s, "mode:    {mode}");
    }
    let _ = writeln!(s, "holders: {}", i.holders.len());
    for h in &i.holders {
        let mode = h.mode.map(|m| format!(" [{m}]")).unwrap_or_default();
        let _ = write!(
            s,
            "  client {} thread {} count {}{mode}",
            h.client_id, h.thread_id, h.count
        );
        if !h.reader_ttls_ms.is_empty() {
            let _ = write!(s, " reader ttls {:?} ms", h.reader_ttls_ms);
        }
        s.push('\n');
    }
    if i.kind == "fair" || !i.queue.is_empty() {
        let _ = writeln!(s, "queue:   {}", i.queue.len());
        for (n, w) in i.queue.iter().enumerate() {
            let deadline = w
                .deadline_ms
                .map_or("none".to_owned(), |d| format!("{d} (epoch ms)"));
            let _ = writeln!(
                s,
                "  {}. client {} thread {} deadline {deadline}",
                n + 1,
                w.client_id,
                w.thread_id
            );
        }
    }
    if i.kind == "group" {
        let _ = writeln!(s, "values:  {}", i.values.len());
        for v in &i.values {
            let deadline = v
                .deadline_ms
                .map_or("none".to_owned(), |d| format!("{d} (epoch ms)"));
            let _ = writeln!(
                s,
                "  {} client {} thread {} count {} deadline {deadline}",
                v.field, v.client_id, v.thread_id, v.count
            );
        }
    }
    if let Some(t) = i.token {
        let _ = writeln!(s, "token:   {t}");
    }
    if let Some(l) = &i.leader {
        let _ = writeln!(
            s,
            "leader:  client {} thread {} term {} proclaimed {}",
            l.client_id,
            l.thread_id,
            json_opt(l.term),
            l.value.as_deref().unwrap_or("-")
        );
    }
    let _ = writeln!(s, "subscribers: {}", i.subscribers());
    for (c, n) in &i.channels {
        let _ = writeln!(s, "  {c}: {n}");
    }
    s
}

fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn json_opt(v: Option<i64>) -> String {
    v.map_or("null".to_owned(), |v| v.to_string())
}

/// The `--json` report: one object.
pub fn render_json(i: &Inspection) -> String {
    let holders: Vec<String> = i
        .holders
        .iter()
        .map(|h| {
            format!(
                "{{\"client_id\":{},\"thread_id\":{},\"count\":{},\"mode\":{},\"reader_ttls_ms\":[{}]}}",
                json_str(&h.client_id),
                json_str(&h.thread_id),
                h.count,
                h.mode.map_or("null".to_owned(), json_str),
                h.reader_ttls_ms
                    .iter()
                    .map(i64::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        })
        .collect();
    let queue: Vec<String> = i
        .queue
        .iter()
        .map(|w| {
            format!(
                "{{\"client_id\":{},\"thread_id\":{},\"deadline_ms\":{}}}",
                json_str(&w.client_id),
                json_str(&w.thread_id),
                json_opt(w.deadline_ms)
            )
        })
        .collect();
    let channels: Vec<String> = i
        .channels
        .iter()
        .map(|(c, n)| format!("{{\"channel\":{},\"subscribers\":{n}}}", json_str(c)))
        .collect();
    let permits: Vec<String> = i
        .permits
        .iter()
        .map(|p| {
            format!(
                "{{\"id\":{},\"expires_ms\":{},\"lease_left_ms\":{}}}",
                json_str(&p.id),
                json_opt(p.expires_ms),
                json_opt(p.expires_ms.map(|e| e - i.now_ms))
            )
        })
        .collect();
    let values: Vec<String> = i
        .values
        .iter()
        .map(|v| {
            format!(
                "{{\"field\":{},\"client_id\":{},\"thread_id\":{},\"count\":{},\"deadline_ms\":{}}}",
                json_str(&v.field),
                json_str(&v.client_id),
                json_str(&v.thread_id),
                v.count,
                json_opt(v.deadline_ms)
            )
        })
        .collect();
    let leader = i.leader.as_ref().map_or("null".to_owned(), |l| {
        format!(
            "{{\"holder\":{},\"client_id\":{},\"thread_id\":{},\"term\":{},\"value\":{}}}",
            json_str(&l.holder),
            json_str(&l.client_id),
            json_str(&l.thread_id),
            json_opt(l.term),
            l.value.as_deref().map_or("null".to_owned(), json_str)
        )
    });
    format!(
        "{{\"name\":{},\"kind\":{},\"held\":{},\"ttl_ms\":{},\"mode\":{},\"holders\":[{}],\"queue\":[{}],\"token\":{},\"subscribers\":{},\"channels\":[{}],\"value\":{},\"permits\":[{}],\"values\":[{}],\"leader\":{}}}",
        json_str(&i.name),
        json_str(i.kind),
        i.exists,
        json_opt(i.ttl_ms),
        i.mode.as_deref().map_or("null".to_owned(), json_str),
        holders.join(","),
        queue.join(","),
        json_opt(i.token),
        i.subscribers(),
        channels.join(","),
        json_opt(i.value),
        permits.join(","),
        values.join(","),
        leader
    )
}

/// `true` for a hash whose fields all look like lock fields (owners, or `mode`).
pub async fn looks_like_lock(redis: &Redis, key: &str) -> Result<bool> {
    let fields = cmd(redis, "HKEYS", vec![key.into()]).await?.into_array();
    let lock = fields.iter().all(|f| {
        let f = text(f);
        f == "mode" || parse_field(&f).is_some_and(|(c, _, _)| c.len() == 36)
    });
    let group = fields.iter().all(|f| is_group_field(&text(f)));
    Ok(!fields.is_empty() && (lock || group))
}

/// Waits for the client to be connected, bounded.
pub async fn connect(redis: &Redis) -> Result<()> {
    match tokio::time::timeout(std::time::Duration::from_secs(10), redis.init()).await {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(match Failure::redis(e) {
            f if f.code == EXIT_DENIED => f,
            f => Failure::new(
                EXIT_ERROR,
                format!("cannot connect to Redis: {}", f.message),
            ),
        }),
        Err(_) => Err(Failure::new(
            EXIT_ERROR,
            "could not connect to Redis within 10 s",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owner_fields_split_at_the_last_colon_and_drop_write() {
        let id = "0b4f4d6e-2a62-4b5e-9d1c-3f0e5c1a2b3c";
        assert_eq!(
            parse_field(&format!("{id}:42")),
            Some((id.into(), "42".into(), false))
        );
        assert_eq!(
            parse_field(&format!("{id}:7:write")),
            Some((id.into(), "7".into(), true))
        );
        assert_eq!(parse_field("mode"), None);
    }

    #[test]
    fn group_fields_are_value_fields_and_their_holders_deadlines_and_counts() {
        let id = "0b4f4d6e-2a62-4b5e-9d1c-3f0e5c1a2b3c";
        let v = "qwvAS12pR0CgRitaypEjUw";
        assert!(is_group_field(v));
        assert!(is_group_field(&format!("{v}:{id}:57:expire_time")));
        assert!(is_group_field(&format!("{v}:{id}:57:lock_count")));
        assert!(!is_group_field(&format!("{id}:57")));
        assert!(!is_group_field("mode"));
        assert!(!is_group_field(&format!("{v}:{id}:57:other")));
        let mut i = Inspection::default();
        group(
            &mut i,
            &[
                (v.into(), format!("{id}:57")),
                (format!("{v}:{id}:57:lock_count"), "2".into()),
                (format!("{v}:{id}:57:expire_time"), "1795393654759".into()),
            ],
        );
        assert_eq!(i.kind, "group");
        assert_eq!(i.values.len(), 1);
        assert_eq!(i.values[0].count, 2);
        assert_eq!(i.values[0].deadline_ms, Some(1_795_393_654_759));
        assert_eq!(i.holders.len(), 1);
        assert!(render(&i).contains("values:  1"));
        assert!(render_json(&i).contains("\"values\":[{\"field\""));
    }

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
