//! The two reports of an inspection: the human-readable one and the `--json` object.

use std::fmt::Write as _;

use super::model::Inspection;

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_strings_are_escaped() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}
