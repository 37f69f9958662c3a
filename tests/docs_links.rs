//! Every relative link of the documentation points at something that exists: the README, the
//! guide's pages (`docs/*.md`), ARCHITECTURE.md, CHANGELOG.md and chaos/README.md. A link's file
//! (or folder) must exist, and a `#fragment` must be the GitHub slug of a heading of the target
//! page (of the same page for a bare `#fragment`). External links (`http:`, `https:`,
//! `mailto:`) are not followed. Links inside code (fenced blocks, code spans) are not links.
//! Also checked: every guide page is compiled as a doc test (named in `src/lib.rs`).
//!
//! No Redis needed.

use std::{
    collections::HashSet,
    fs,
    path::{Path, PathBuf},
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The guide's pages, sorted.
fn guide_pages(root: &Path) -> Vec<PathBuf> {
    let mut pages: Vec<PathBuf> = fs::read_dir(root.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("docs/ entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    pages.sort();
    pages
}

/// The documents whose links are checked.
fn documents(root: &Path) -> Vec<PathBuf> {
    let mut docs: Vec<PathBuf> = [
        "README.md",
        "ARCHITECTURE.md",
        "CHANGELOG.md",
        "chaos/README.md",
    ]
    .iter()
    .map(|f| root.join(f))
    .collect();
    docs.extend(guide_pages(root));
    docs
}

/// The text with fenced code blocks blanked (their lines kept empty, so line numbers hold).
fn without_fences(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<String> = None;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let marker: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        let opens = marker.len() >= 3 && marker.chars().all(|c| c == marker.as_bytes()[0] as char);
        match &fence {
            None if opens => {
                fence = Some(marker);
                out.push('\n');
            }
            Some(open)
                if opens
                    && marker.starts_with(open.as_str())
                    && trimmed.trim_end().len() == marker.len() =>
            {
                fence = None;
                out.push('\n');
            }
            Some(_) => out.push('\n'),
            None => out.push_str(line),
        }
    }
    out
}

/// The text with code spans blanked, paragraph by paragraph (a code span may cross a line
/// break, never a blank line); newlines are kept.
fn without_code_spans(text: &str) -> String {
    text.split("\n\n")
        .map(|para| {
            let chars: Vec<char> = para.chars().collect();
            let mut out = String::with_capacity(para.len());
            let mut i = 0;
            while i < chars.len() {
                if chars[i] != '`' {
                    out.push(chars[i]);
                    i += 1;
                    continue;
                }
                let run = chars[i..].iter().take_while(|&&c| c == '`').count();
                // The closing run: the next run of exactly `run` backticks.
                let mut j = i + run;
                let mut close = None;
                while j < chars.len() {
                    if chars[j] == '`' {
                        let n = chars[j..].iter().take_while(|&&c| c == '`').count();
                        if n == run {
                            close = Some(j + n);
                            break;
                        }
                        j += n;
                    } else {
                        j += 1;
                    }
                }
                match close {
                    Some(end) => {
                        for &c in &chars[i..end] {
                            out.push(if c == '\n' { '\n' } else { ' ' });
                        }
                        i = end;
                    }
                    None => {
                        for _ in 0..run {
                            out.push('`');
                        }
                        i += run;
                    }
                }
            }
            out
        })
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// Every link target of a markdown text, with its line: inline links and images
/// (`[text](target "title")`) and reference definitions (`[label]: target`).
fn links(text: &str) -> Vec<(usize, String)> {
    let text = without_code_spans(&without_fences(text));
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut rest = line;
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let target = if let Some(inner) = after.strip_prefix('<') {
                inner.split('>').next().unwrap_or("")
            } else {
                // Up to the closing parenthesis (balanced) or a title after a space.
                let mut depth = 0usize;
                let mut end = after.len();
                for (k, c) in after.char_indices() {
                    match c {
                        '(' => depth += 1,
                        ')' if depth == 0 => {
                            end = k;
                            break;
                        }
                        ')' => depth -= 1,
                        ' ' => {
                            end = k;
                            break;
                        }
                        _ => {}
                    }
                }
                &after[..end]
            };
            found.push((n + 1, target.to_string()));
            rest = after;
        }
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() <= 3 && trimmed.starts_with('[') {
            let close = trimmed.find(']').unwrap_or(0);
            if close > 1 && trimmed[close + 1..].starts_with(':') {
                let target = trimmed[close + 2..].split_whitespace().next().unwrap_or("");
                if !target.is_empty() {
                    found.push((n + 1, target.trim_matches(['<', '>']).to_string()));
                }
            }
        }
    }
    found
}

/// A heading's GitHub anchor: the text as rendered (code spans, emphasis and links reduced to
/// their text), lowercased, every character that is not a letter, digit, `-`, `_` or space
/// dropped, spaces turned into `-`.
fn slug(heading: &str) -> String {
    // `[text](url)` → `text`.
    let mut plain = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        match rest[open..].find("](") {
            Some(mid) => {
                let mid = open + mid;
                let close = rest[mid..].find(')').map(|c| mid + c);
                match close {
                    Some(close) => {
                        plain.push_str(&rest[..open]);
                        plain.push_str(&rest[open + 1..mid]);
                        rest = &rest[close + 1..];
                    }
                    None => break,
                }
            }
            None => break,
        }
    }
    plain.push_str(rest);
    plain
        .to_lowercase()
        .chars()
        .filter(|&c| c.is_alphanumeric() || c == '-' || c == '_' || c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a markdown text: its ATX headings' slugs (a repeated slug gets `-1`, `-2`,
/// ... as on GitHub) and explicit `<a id="..">` / `<a name="..">` anchors.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut out = HashSet::new();
    for line in without_fences(text).lines() {
        let trimmed = line.trim_start();
        if line.len() - trimmed.len() <= 3 && trimmed.starts_with('#') {
            let level = trimmed.chars().take_while(|&c| c == '#').count();
            let body = &trimmed[level..];
            if level <= 6 && (body.is_empty() || body.starts_with(' ')) {
                let body = body.trim().trim_end_matches('#').trim();
                let base = slug(body);
                let mut s = base.clone();
                let mut k = 0;
                while !seen.insert(s.clone()) {
                    k += 1;
                    s = format!("{base}-{k}");
                }
                out.insert(s);
            }
        }
        for key in ["<a id=\"", "<a name=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(key) {
                let after = &rest[at + key.len()..];
                if let Some(end) = after.find('"') {
                    out.insert(after[..end].to_string());
                }
                rest = after;
            }
        }
    }
    out
}

fn is_external(target: &str) -> bool {
    let lower = target.to_ascii_lowercase();
    lower.starts_with("http://") || lower.starts_with("https://") || lower.starts_with("mailto:")
}

/// `%20` and the like, decoded.
fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `a/b/../c` as `a/c` (for the messages; the file system resolves either).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir if out.file_name().is_some() => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The broken links of the given documents, one line each (`file:line: target: why`).
fn broken_links(root: &Path, documents: &[PathBuf]) -> Vec<String> {
    let mut broken = Vec::new();
    for doc in documents {
        let name = doc.strip_prefix(root).unwrap_or(doc).display().to_string();
        let text = match fs::read_to_string(doc) {
            Ok(t) => t,
            Err(e) => {
                broken.push(format!("{name}: cannot read: {e}"));
                continue;
            }
        };
        for (line, target) in links(&text) {
            if target.is_empty() {
                broken.push(format!("{name}:{line}: empty link target"));
                continue;
            }
            if is_external(&target) {
                continue;
            }
            if target.contains("://") {
                broken.push(format!(
                    "{name}:{line}: {target}: a scheme other than http(s)/mailto"
                ));
                continue;
            }
            let (path, fragment) = match target.split_once('#') {
                Some((p, f)) => (p, Some(f)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                doc.clone()
            } else {
                normalize(&doc.parent().unwrap().join(percent_decode(path)))
            };
            if !file.exists() {
                broken.push(format!("{name}:{line}: {target}: no such file"));
                continue;
            }
            let Some(fragment) = fragment else { continue };
            if file.is_dir() || file.extension().is_none_or(|e| e != "md") {
                broken.push(format!(
                    "{name}:{line}: {target}: an anchor into a file that is not markdown"
                ));
                continue;
            }
            let target_text = fs::read_to_string(&file).unwrap_or_default();
            if !anchors(&target_text).contains(&percent_decode(fragment)) {
                broken.push(format!(
                    "{name}:{line}: {target}: no heading of {} has the anchor #{fragment}",
                    file.strip_prefix(root).unwrap_or(&file).display()
                ));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_of_the_documentation_resolves() {
    let root = root();
    let documents = documents(&root);
    assert!(documents.len() >= 6, "documents found: {documents:?}");
    // The parser finds the links there are (about a hundred today), not none.
    let relative: usize = documents
        .iter()
        .map(|d| {
            let text = fs::read_to_string(d).unwrap_or_default();
            links(&text).iter().filter(|(_, t)| !is_external(t)).count()
        })
        .sum();
    assert!(relative >= 50, "only {relative} relative links found");
    let broken = broken_links(&root, &documents);
    assert!(
        broken.is_empty(),
        "broken links ({}):\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn every_guide_page_is_compiled_as_a_doc_test() {
    let root = root();
    let lib = fs::read_to_string(root.join("src/lib.rs")).expect("src/lib.rs");
    let missing: Vec<String> = guide_pages(&root)
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .filter(|f| !lib.contains(&format!("#[doc = include_str!(\"../docs/{f}\")]")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs pages not included as doc tests in src/lib.rs: {missing:?}"
    );
    assert!(lib.contains("#[doc = include_str!(\"../README.md\")]"));
}

/// The checker itself: a missing file, a missing anchor (in another page and in the same
/// page) and a link hidden in code are told apart from good links.
#[test]
fn the_checker_finds_a_missing_file_and_a_missing_anchor() {
    let dir = std::env::temp_dir().join(format!("docs_links_{}", std::process::id()));
    fs::create_dir_all(dir.join("docs")).unwrap();
    fs::write(
        dir.join("docs/page.md"),
        "# A page\n\n## Java ↔ Rust configuration\n\n## `#[locked]` and `run`\n\n## Twice\n\n## Twice\n",
    )
    .unwrap();
    fs::write(
        dir.join("README.md"),
        "# Front\n\n## Quick start (async)\n\n\
         [good](docs/page.md) [good](docs/page.md#java--rust-configuration)\n\
         [good](docs/page.md#locked-and-run) [good](docs/page.md#twice-1) [good](#quick-start-async)\n\
         [good](https://example.com/nothing)\n[ref]: docs/page.md#a-page\n\
         `[in code](docs/nothing.md)`\n\n```text\n[in a fence](docs/nothing.md)\n```\n\n\
         [no file](docs/missing.md)\n[no anchor](docs/page.md#nothing-here)\n[no anchor here](#nowhere)\n\
         [no third](docs/page.md#twice-2)\n",
    )
    .unwrap();
    let broken = broken_links(&dir, &[dir.join("README.md")]);
    fs::remove_dir_all(&dir).ok();
    assert_eq!(broken.len(), 4, "{broken:#?}");
    assert!(
        broken[0].contains("docs/missing.md: no such file"),
        "{broken:#?}"
    );
    assert!(broken[1].contains("#nothing-here"), "{broken:#?}");
    assert!(broken[2].contains("#nowhere"), "{broken:#?}");
    assert!(broken[3].contains("#twice-2"), "{broken:#?}");
}

#[test]
fn slugs_are_github_slugs() {
    assert_eq!(
        slug("Java ↔ Rust configuration"),
        "java--rust-configuration"
    );
    assert_eq!(
        slug("Locking a function: `#[locked]`"),
        "locking-a-function-locked"
    );
    assert_eq!(
        slug("What the holder is told, and when"),
        "what-the-holder-is-told-and-when"
    );
    assert_eq!(slug("12. PUBLISH or SPUBLISH"), "12-publish-or-spublish");
    assert_eq!(slug("4. Pub/sub"), "4-pubsub");
    assert_eq!(
        slug("The `redisson-lock` command-line tool"),
        "the-redisson-lock-command-line-tool"
    );
    assert_eq!(slug("Redis permissions (ACL)"), "redis-permissions-acl");
    assert_eq!(slug("A [link](x.md) in it"), "a-link-in-it");
}
