//! Skipped tests, said where they are seen and counted. A test that cannot run here (no Java
//! Redisson, no second Redisson version) says so with [`test`], and one that skips a part of
//! itself with [`part`]: a line on the process's standard error, past the test harness's
//! capture, in a form `scripts/run-tests.py` counts (a skipped test is counted as skipped, not
//! passed) and lists at the end of the run.
//!
//! A skip names the environment variable whose absence it answers (`REDISSON_CLASSPATH`,
//! `REDISSON_CLASSPATH_ALT`): a skip for want of a variable that is set is a test that stopped
//! using what it was given, and fails (here, at once, and in the runner's summary). So where
//! Java is expected (CI sets both class paths) no skip passes.
//!
//! The harness captures `print!`, `println!`, `eprint!` and `eprintln!` and shows their output
//! only when the test fails: a skip said that way passes unseen. A test here fails on any
//! `"SKIPPED` string written outside this file.

use std::io::Write;

/// The start of a line saying a whole test was skipped:
/// `SKIPPED test <name> (needs <VAR>): <why>`.
pub const TEST: &str = "SKIPPED test ";

/// The start of a line saying part of a test was skipped:
/// `SKIPPED part of <name> (<what>; needs <VAR>): <why>`.
pub const PART: &str = "SKIPPED part of ";

/// Says that the test `name` (its function's name) was skipped for want of the environment
/// variable `needs`, and why: the test returns at once after it, and the run counts it as
/// skipped, not passed.
///
/// # Panics
/// When `needs` is set (not blank): the test had what it needed and skipped anyway.
pub fn test(name: &str, needs: &str, why: &str) {
    refuse_when_set(name, needs);
    say(&format!("{TEST}{name} (needs {needs}): {why}"));
}

/// Says that `what`, part of the test `name`, was skipped for want of the environment variable
/// `needs`, and why: the test runs the rest, and passes or fails on it; the run lists the
/// skipped part.
///
/// # Panics
/// When `needs` is set (not blank), as [`test`].
pub fn part(name: &str, what: &str, needs: &str, why: &str) {
    refuse_when_set(name, needs);
    say(&format!("{PART}{name} ({what}; needs {needs}): {why}"));
}

/// `true` when the environment variable `var` is set to something other than blanks (what the
/// tests take for "given").
pub fn is_set(var: &str) -> bool {
    std::env::var(var).is_ok_and(|v| !v.trim().is_empty())
}

fn refuse_when_set(name: &str, needs: &str) {
    assert!(
        !is_set(needs),
        "{name} would skip for want of {needs}, but {needs} is set: a test that was given what \
         it needs must use it"
    );
}

/// Writes `line` to the process's standard error itself, which the harness does not capture,
/// on a line of its own: in one write, after a line break (the harness's quiet dots share the
/// stream, and would otherwise start the line).
fn say(line: &str) {
    let _ = std::io::stderr().write_all(format!("\n{line}\n").as_bytes());
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    /// The Rust files of the workspace (`target/` and hidden directories aside).
    fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') {
                    rust_files(&path, out);
                }
            } else if name.ends_with(".rs") {
                out.push(path);
            }
        }
    }

    /// A skip for want of a variable that is set fails the test that says it (`PATH` is set
    /// wherever tests run), before anything is said.
    #[test]
    #[should_panic(expected = "but PATH is set")]
    fn a_skip_for_want_of_a_variable_that_is_set_fails_the_test() {
        super::test(
            "a_skip_for_want_of_a_variable_that_is_set_fails_the_test",
            "PATH",
            "PATH is given",
        );
    }

    /// Every skip goes through this file: a `"SKIPPED` string anywhere else (outside comments)
    /// is a skip line written by hand, which the harness may swallow and the run's summary
    /// would not count in its form.
    #[test]
    fn every_skip_of_the_workspace_is_said_through_this_module() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let here = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/skip.rs");
        let mut files = Vec::new();
        rust_files(root, &mut files);
        assert!(files.len() > 50, "the workspace's sources were not found");
        let quote = concat!('"', "SKIPPED");
        let mut found = Vec::new();
        for f in files.iter().filter(|f| **f != here) {
            let text = std::fs::read_to_string(f).unwrap();
            for (i, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if code.contains(quote) {
                    found.push(format!("{}:{}: {}", f.display(), i + 1, line.trim()));
                }
            }
        }
        assert!(
            found.is_empty(),
            "skips written by hand (say them with redisson_lock_test_kit::skip::test or \
             ::part):\n{}",
            found.join("\n")
        );
    }
}
