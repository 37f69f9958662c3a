//! The crate's dependency rule, checked: every `crate::`/`super::` path in the library's code
//! (test modules aside) must point at a module of the same or a lower layer, as listed in
//! ARCHITECTURE.md's `layers` block, and no two files may import each other, directly or
//! through others (no cycles between files, a folder's own `mod.rs` included: a `mod.rs` that
//! re-exports its rooms is their face, and they do not use it), nor two rooms of one folder (its
//! files and subfolders; the few known cycles are listed and may only go). Every source file
//! must belong to a layer and be named in ARCHITECTURE.md.
//!
//! `ARCH_GRAPH=1 cargo test --test architecture -- --nocapture` prints the file graph.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// A module path (`["lock", "acquire", "hold"]`), the crate root being `[]`.
type ModPath = Vec<String>;

struct Module {
    file: String,
    /// Names this module re-exports (`pub use`, `pub(crate) use`), as absolute paths.
    reexports: BTreeMap<String, ModPath>,
    /// Every absolute path the module's code names (imports and inline paths).
    paths: Vec<ModPath>,
}

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path.file_name().unwrap() != "bin" {
                rust_files(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `src/lock/claim/calls.rs` → `lock::claim::calls`; `mod.rs` and `lib.rs` name their folder.
fn module_of(rel: &str) -> ModPath {
    let rel = rel.trim_end_matches(".rs");
    let mut parts: Vec<String> = rel.split('/').map(str::to_owned).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    parts
}

/// The code without comments, string and char literals, and the trailing `#[cfg(test)] mod`.
fn code_of(text: &str) -> String {
    let mut lines: Vec<&str> = text.lines().collect();
    if let Some(i) = lines.windows(2).position(|w| {
        w[0] == "#[cfg(test)]" && (w[1].starts_with("mod ") || w[1].starts_with("pub(crate) mod "))
    }) {
        lines.truncate(i);
    }
    let text = lines.join("\n");
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if c == b'/' && bytes.get(i + 1) == Some(&b'*') {
            i += 2;
            while i + 1 < bytes.len() && !(bytes[i] == b'*' && bytes[i + 1] == b'/') {
                i += 1;
            }
            i += 2;
        } else if c == b'"' {
            // Raw strings (r"..", r#".."#) have no escapes; plain ones do.
            let raw = i > 0 && (bytes[i - 1] == b'r' || bytes[i - 1] == b'#');
            let hashes = text[..i].chars().rev().take_while(|&c| c == '#').count();
            i += 1;
            loop {
                if i >= bytes.len() {
                    break;
                }
                if !raw && bytes[i] == b'\\' {
                    i += 2;
                    continue;
                }
                if bytes[i] == b'"'
                    && (!raw || text[i + 1..].chars().take_while(|&c| c == '#').count() >= hashes)
                {
                    i += 1 + if raw { hashes } else { 0 };
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if c == b'\''
            && (bytes.get(i + 2) == Some(&b'\'')
                || (bytes.get(i + 1) == Some(&b'\\') && bytes.get(i + 3) == Some(&b'\'')))
        {
            // A char literal ('x' or '\n'); lifetimes ('a) are left alone.
            i += if bytes[i + 1] == b'\\' { 4 } else { 3 };
            out.push(' ');
        } else {
            out.push(c as char);
            i += 1;
        }
    }
    out
}

fn tokens(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push("::".into());
            i += 2;
        } else if c.is_whitespace() {
            i += 1;
        } else {
            out.push(c.to_string());
            i += 1;
        }
    }
    out
}

/// Expands a use tree starting at `toks[*i]` into its paths (each a list of segments).
fn use_tree(toks: &[String], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
    let mut path = prefix.to_vec();
    loop {
        match toks.get(*i).map(String::as_str) {
            Some("{") => {
                *i += 1;
                loop {
                    if toks.get(*i).map(String::as_str) == Some("}") {
                        *i += 1;
                        return;
                    }
                    use_tree(toks, i, &path, out);
                    if toks.get(*i).map(String::as_str) == Some(",") {
                        *i += 1;
                    }
                }
            }
            Some("*") => {
                *i += 1;
                out.push(path);
                return;
            }
            Some("self") if !path.is_empty() => {
                *i += 1;
                skip_alias(toks, i);
                out.push(path);
                return;
            }
            Some(id) if id != "::" && id != "," && id != "}" && id != ";" && id != "as" => {
                path.push(id.to_owned());
                *i += 1;
                if toks.get(*i).map(String::as_str) == Some("::") {
                    *i += 1;
                    continue;
                }
                let alias = skip_alias(toks, i);
                out.push(path.clone());
                if let Some(alias) = alias {
                    // `use x::y as z`: later `z::...` paths are resolved through this.
                    out.push(vec![format!("#alias={alias}")]);
                }
                return;
            }
            _ => {
                out.push(path);
                return;
            }
        }
    }
}

fn skip_alias(toks: &[String], i: &mut usize) -> Option<String> {
    if toks.get(*i).map(String::as_str) == Some("as") {
        *i += 2;
        return toks.get(*i - 1).cloned();
    }
    None
}

/// Makes a path absolute from module `here`; `None` for paths outside the crate (`std::..`).
fn absolute(path: &[String], here: &ModPath, children: &BTreeSet<ModPath>) -> Option<ModPath> {
    let mut base = here.clone();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop();
                rest = &rest[1..];
            }
        }
        Some("self") => rest = &rest[1..],
        Some(first) => {
            // A path relative to this module (`use doubt::HoldState` in `watchdog`).
            let mut child = here.clone();
            child.push(first.to_owned());
            if !children.contains(&child) {
                return None;
            }
        }
        None => return None,
    }
    base.extend(rest.iter().cloned());
    Some(base)
}

fn parse(here: &ModPath, file: &str, text: &str, modules: &BTreeSet<ModPath>) -> Module {
    let code = code_of(text);
    let toks = tokens(&code);
    let mut reexports = BTreeMap::new();
    let mut paths = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let public = toks[i] == "pub";
        let at_use = toks[i] == "use"
            || (public && toks.get(i + 1).map(String::as_str) == Some("use"))
            || (public
                && toks.get(i + 1).map(String::as_str) == Some("(")
                && toks.get(i + 4).map(String::as_str) == Some("use"));
        if at_use {
            while toks[i] != "use" {
                i += 1;
            }
            i += 1;
            let mut tree = Vec::new();
            use_tree(&toks, &mut i, &[], &mut tree);
            for p in tree {
                if p.first().is_some_and(|s| s.starts_with("#alias")) {
                    continue;
                }
                if let Some(abs) = absolute(&p, here, modules) {
                    if public {
                        if let Some(name) = abs.last() {
                            reexports.insert(name.clone(), abs.clone());
                        }
                    }
                    paths.push(abs);
                }
            }
            continue;
        }
        if (toks[i] == "crate" || toks[i] == "super")
            && toks.get(i + 1).map(String::as_str) == Some("::")
            && (i == 0 || toks[i - 1] != "::")
        {
            let mut p = vec![toks[i].clone()];
            let mut j = i + 1;
            while toks.get(j).map(String::as_str) == Some("::") {
                match toks.get(j + 1) {
                    Some(id) if id.chars().all(|c| c.is_alphanumeric() || c == '_') => {
                        p.push(id.clone());
                        j += 2;
                    }
                    _ => break,
                }
            }
            if let Some(abs) = absolute(&p, here, modules) {
                paths.push(abs);
            }
            i = j;
            continue;
        }
        i += 1;
    }
    Module {
        file: file.to_owned(),
        reexports,
        paths,
    }
}

/// The file a path leads to: its longest module prefix, followed through re-exports.
fn resolve(path: &ModPath, mods: &BTreeMap<ModPath, Module>, depth: usize) -> Option<String> {
    let mut n = path.len();
    while !mods.contains_key(&path[..n]) {
        n -= 1;
    }
    let module = &mods[&path[..n]];
    if depth < 8 {
        if let Some(next) = path.get(n) {
            if let Some(target) = module.reexports.get(next) {
                if target != path {
                    let mut target = target.clone();
                    target.extend(path[n + 1..].iter().cloned());
                    return resolve(&target, mods, depth + 1);
                }
            }
        }
    }
    Some(module.file.clone())
}

/// The `layers` block of ARCHITECTURE.md: one line per layer, lowest first, each
/// `name: path path ...` (a folder ends in `/`).
fn layers() -> Vec<(String, Vec<String>)> {
    let doc = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md");
    let block = doc
        .split("```layers")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("ARCHITECTURE.md has a ```layers block");
    block
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let (name, paths) = l.split_once(':').expect("`name: paths` per layer line");
            (
                name.trim().to_owned(),
                paths.split_whitespace().map(str::to_owned).collect(),
            )
        })
        .collect()
}

/// The layer of a file: the layer of its longest matching entry.
fn layer_of(file: &str, layers: &[(String, Vec<String>)]) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize)> = None;
    for (rank, (_, entries)) in layers.iter().enumerate() {
        for e in entries {
            let hit = if e.ends_with('/') {
                file.starts_with(e.as_str())
            } else {
                file == e
            };
            if hit && best.is_none_or(|(_, len)| e.len() > len) {
                best = Some((rank, e.len()));
            }
        }
    }
    best
}

struct Graph {
    files: Vec<String>,
    edges: BTreeMap<String, BTreeSet<String>>,
}

fn graph() -> Graph {
    let src = src_dir();
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let rel = |p: &Path| {
        format!(
            "src/{}",
            p.strip_prefix(&src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        )
    };
    let known: BTreeSet<ModPath> = files
        .iter()
        .map(|f| module_of(&rel(f)["src/".len()..]))
        .collect();
    let mut mods = BTreeMap::new();
    for f in &files {
        let r = rel(f);
        let here = module_of(&r["src/".len()..]);
        let text = fs::read_to_string(f).unwrap();
        mods.insert(here.clone(), parse(&here, &r, &text, &known));
    }
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for m in mods.values() {
        let out = edges.entry(m.file.clone()).or_default();
        for p in &m.paths {
            if let Some(target) = resolve(p, &mods, 0) {
                if target != m.file {
                    out.insert(target);
                }
            }
        }
    }
    let mut files: Vec<String> = mods.values().map(|m| m.file.clone()).collect();
    files.sort();
    Graph { files, edges }
}

/// Files in a cycle, each cycle as a list (Tarjan's strongly connected components).
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        t.index.insert(v, t.next);
        t.low.insert(v, t.next);
        t.next += 1;
        t.stack.push(v);
        t.on.insert(v);
        if let Some(ws) = t.g.edges.get(v) {
            // Every edge counts, a file's use of its own folder's `mod.rs` too: a `mod.rs` that
            // re-exports its rooms and also holds what they use makes a cycle with them.
            for w in ws {
                if !t.index.contains_key(w.as_str()) {
                    visit(t, w);
                    let lw = t.low[w.as_str()];
                    let lv = t.low[v];
                    t.low.insert(v, lv.min(lw));
                } else if t.on.contains(w.as_str()) {
                    let iw = t.index[w.as_str()];
                    let lv = t.low[v];
                    t.low.insert(v, lv.min(iw));
                }
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for f in &g.files {
        if !t.index.contains_key(f.as_str()) {
            visit(&mut t, f);
        }
    }
    t.out
}

#[test]
fn no_file_imports_from_a_higher_layer() {
    let g = graph();
    if std::env::var_os("ARCH_GRAPH").is_some() {
        for (f, to) in &g.edges {
            println!(
                "{f} -> {}",
                to.iter().cloned().collect::<Vec<_>>().join(" ")
            );
        }
    }
    let layers = layers();
    let mut wrong = Vec::new();
    for f in &g.files {
        let Some((from, _)) = layer_of(f, &layers) else {
            wrong.push(format!("{f} is in no layer of ARCHITECTURE.md"));
            continue;
        };
        for to in &g.edges[f] {
            if let Some((rank, _)) = layer_of(to, &layers) {
                if rank > from {
                    wrong.push(format!(
                        "{f} (layer {}) imports {to} (layer {})",
                        layers[from].0, layers[rank].0
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
}

/// The room of `file` among the rooms of `folder` (its files and its subfolders, a subfolder
/// written with a trailing `/`), `None` outside it.
fn room_of(file: &str, folder: &str) -> Option<String> {
    let rest = file.strip_prefix(folder)?.strip_prefix('/')?;
    Some(match rest.split_once('/') {
        Some((sub, _)) => format!("{folder}/{sub}/"),
        None => file.to_owned(),
    })
}

/// Folder cycles: rooms of one folder (its files and subfolders) that depend on each other,
/// directly or through other rooms of that folder, for every folder of the crate.
fn folder_cycles(g: &Graph) -> Vec<Vec<String>> {
    let mut folders = BTreeSet::new();
    for f in &g.files {
        let mut dir = f.as_str();
        while let Some((parent, _)) = dir.rsplit_once('/') {
            folders.insert(parent.to_owned());
            dir = parent;
        }
    }
    let mut found = Vec::new();
    for folder in &folders {
        let mut rooms = Graph {
            files: Vec::new(),
            edges: BTreeMap::new(),
        };
        for (from, tos) in &g.edges {
            let Some(a) = room_of(from, folder) else {
                continue;
            };
            for to in tos {
                match room_of(to, folder) {
                    Some(b) if b != a => {
                        rooms.edges.entry(a.clone()).or_default().insert(b.clone());
                        rooms.edges.entry(b).or_default();
                    }
                    _ => {}
                }
            }
        }
        rooms.files = rooms.edges.keys().cloned().collect();
        found.extend(cycles(&rooms));
    }
    found
}

#[test]
fn no_two_rooms_of_a_folder_depend_on_each_other() {
    let found: Vec<String> = folder_cycles(&graph())
        .iter()
        .map(|c| c.join(" <-> "))
        .collect();
    assert!(
        found.is_empty(),
        "rooms of one folder that import each other (directly or through others):\n{found:#?}"
    );
}

#[test]
fn no_two_files_depend_on_each_other() {
    let found = cycles(&graph());
    assert!(
        found.is_empty(),
        "files that import each other (directly or through others):\n{}",
        found
            .iter()
            .map(|c| c.join(" <-> "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn architecture_names_every_source_file() {
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("ARCHITECTURE.md")).unwrap();
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    rust_files(&src_dir().join("bin"), &mut files);
    let missing: Vec<String> = files
        .iter()
        .map(|f| {
            f.strip_prefix(src_dir())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|rel| {
            let stem = rel.trim_end_matches(".rs");
            // `lock/kinds/fair.rs` is named as `lock/kinds/fair.rs` or listed in its folder's
            // row as `fair`; `mod.rs` files by their folder.
            let (dir, name) = stem.rsplit_once('/').unwrap_or(("", stem));
            let named = if name == "mod" || name == "lib" {
                doc.contains(&format!("src/{stem}.rs")) || doc.contains(&format!("src/{dir}/"))
            } else {
                doc.contains(&format!("src/{stem}.rs"))
                    || (doc.contains(&format!("src/{dir}/")) && doc.contains(&format!("`{name}`")))
            };
            !named
        })
        .collect();
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md does not name: {missing:?}"
    );
}

/// The checker itself: a file importing from a higher layer and a two-file cycle are found.
#[test]
fn the_checker_finds_an_upward_import_and_a_cycle() {
    let known: BTreeSet<ModPath> = [vec![], vec!["a".into()], vec!["b".into()]]
        .into_iter()
        .collect();
    let a = parse(
        &vec!["a".into()],
        "src/a.rs",
        "use crate::{b::{X, Y as Z}, error};\nfn f() { super::b::g(); }\n#[cfg(test)]\nmod tests { use crate::c; }",
        &known,
    );
    let paths: Vec<String> = a.paths.iter().map(|p| p.join("::")).collect();
    assert_eq!(paths, ["b::X", "b::Y", "error", "b::g"]);
    let b = parse(
        &vec!["b".into()],
        "src/b.rs",
        "pub(crate) use crate::a::W;",
        &known,
    );
    assert_eq!(b.reexports["W"], vec!["a".to_owned(), "W".to_owned()]);
    let g = Graph {
        files: vec!["src/a.rs".into(), "src/b.rs".into()],
        edges: [
            ("src/a.rs".to_owned(), ["src/b.rs".to_owned()].into()),
            ("src/b.rs".to_owned(), ["src/a.rs".to_owned()].into()),
        ]
        .into(),
    };
    assert_eq!(
        cycles(&g),
        vec![vec!["src/a.rs".to_owned(), "src/b.rs".to_owned()]]
    );
    // A folder's `mod.rs` that re-exports a room which uses it: a cycle like any other.
    let edge = |a: &str, b: &str| (a.to_owned(), BTreeSet::from([b.to_owned()]));
    let g = Graph {
        files: vec!["src/x/mod.rs".into(), "src/x/y.rs".into()],
        edges: [
            edge("src/x/mod.rs", "src/x/y.rs"),
            edge("src/x/y.rs", "src/x/mod.rs"),
        ]
        .into(),
    };
    assert_eq!(
        cycles(&g),
        vec![vec!["src/x/mod.rs".to_owned(), "src/x/y.rs".to_owned()]]
    );
    // Rooms of one folder that depend on each other through files deeper down.
    let g = Graph {
        files: vec![
            "src/c.rs".into(),
            "src/l/a/h.rs".into(),
            "src/l/f.rs".into(),
        ],
        edges: [
            edge("src/c.rs", "src/l/a/h.rs"),
            edge("src/l/f.rs", "src/c.rs"),
            ("src/l/a/h.rs".to_owned(), BTreeSet::new()),
        ]
        .into(),
    };
    assert_eq!(
        folder_cycles(&g),
        vec![vec!["src/c.rs".to_owned(), "src/l/".to_owned()]]
    );
    let layers = vec![
        ("low".to_owned(), vec!["src/a.rs".to_owned()]),
        ("high".to_owned(), vec!["src/x/".to_owned()]),
    ];
    assert_eq!(layer_of("src/x/y.rs", &layers).map(|l| l.0), Some(1));
    assert_eq!(layer_of("src/a.rs", &layers).map(|l| l.0), Some(0));
    assert_eq!(layer_of("src/b.rs", &layers), None);
}

/// The string literals of `text` (their values, `\`-newline continuations followed as the
/// compiler does), each with the line it starts on. Comments and char literals are skipped.
fn string_literals(text: &str) -> Vec<(usize, String)> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                line += usize::from(chars[i] == '\n');
                i += 1;
            }
            i += 2;
        } else if c == '\'' && chars.get(i + 1) == Some(&'\\') {
            // An escaped char literal ('\n', '\'', '\u{..}'): up to its closing quote.
            i += 3;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            // A char literal ('"'); a lifetime ('a) has no closing quote there.
            i += 3;
        } else if c == '"' {
            let raw = i > 0 && (chars[i - 1] == 'r' || chars[i - 1] == '#');
            let hashes = chars[..i].iter().rev().take_while(|&&c| c == '#').count();
            let start = line;
            let mut value = String::new();
            i += 1;
            while i < chars.len() {
                let c = chars[i];
                if !raw && c == '\\' {
                    if chars.get(i + 1) == Some(&'\n') {
                        // A continuation: the newline and the next line's indentation vanish.
                        i += 1;
                        while i < chars.len() && chars[i].is_whitespace() {
                            line += usize::from(chars[i] == '\n');
                            i += 1;
                        }
                        continue;
                    }
                    value.push(c);
                    value.extend(chars.get(i + 1));
                    i += 2;
                    continue;
                }
                if c == '"'
                    && (!raw || chars[i + 1..].iter().take_while(|&&c| c == '#').count() >= hashes)
                {
                    i += 1 + if raw { hashes } else { 0 };
                    break;
                }
                line += usize::from(c == '\n');
                value.push(c);
                i += 1;
            }
            out.push((start, value));
        } else {
            i += 1;
        }
    }
    out
}

/// A message broken over source lines keeps no run of the source's indentation inside it (a
/// line ended without `\`, or joined by an editor): no string literal in `src/` holds eight
/// spaces in a row.
#[test]
fn no_string_literal_swallows_indentation() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    rust_files(&src_dir().join("bin"), &mut files);
    let mut found = Vec::new();
    for f in &files {
        let text = fs::read_to_string(f).unwrap();
        for (line, value) in string_literals(&text) {
            if value.contains("        ") {
                found.push(format!("{}:{line}: {value:?}", f.display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "string literals with a run of spaces:\n{}",
        found.join("\n")
    );
    let sample =
        "let a = '\"'; // \"  x        y\"\nf(\"one \\\n    two\", r#\"a\"b\"#, \"x        y\");";
    let values: Vec<String> = string_literals(sample).into_iter().map(|s| s.1).collect();
    assert_eq!(values, ["one two", "a\"b", "x        y"]);
}
