//! A lock's state, read from its keys in Redisson's layout: the hash (owners and hold counts,
//! a read-write lock's mode and readers' timeouts, a group multi-lock's values), the fair
//! queue and its deadlines, the fencing token and an election's proclamation, and the
//! subscribers of its unlock channel(s).

use fred::clients::Client as Redis;

use super::{
    model::{is_group_field, parse_field, GroupValue, Holder, Inspection, Leader, Waiter},
    redis::{braced, cmd, subscribers, text, ttl_ms, CliError, Result, EXIT_ERROR},
};

/// Reads everything about the lock whose raw name is `name`, a key of type `key_type`
/// (`none` for a lock whose hash is gone: its fair queue or fencing token may remain).
pub async fn inspect(redis: &Redis, name: &str, key_type: &str) -> Result<Inspection> {
    let b = braced(name);
    let mut out = Inspection {
        name: name.to_owned(),
        kind: "reentrant",
        ..Default::default()
    };
    match key_type {
        "none" => {}
        "hash" => out.exists = true,
        other => {
            return Err(CliError::new(
                EXIT_ERROR,
                format!(
                    "key '{name}' is a {other}, not a lock (locks are hashes; semaphores and \
                     latches are integer strings)"
                ),
            ))
        }
    }
    if out.exists {
        out.ttl_ms = ttl_ms(redis, name).await?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inspect::render::{render, render_json};

    #[test]
    fn group_fields_are_value_fields_and_their_holders_deadlines_and_counts() {
        let id = "0b4f4d6e-2a62-4b5e-9d1c-3f0e5c1a2b3c";
        let v = "qwvAS12pR0CgRitaypEjUw";
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
}
