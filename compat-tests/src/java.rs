//! The Java driver of real Redisson (`compat-tests/java/LockPeer.java`): compiled against a
//! class path by `compat-tests/java/build.sh`, started as a `lock-peer` that speaks the same
//! line protocol. Shared by the cross-language tests (`tests/beside_java.rs`) and the bench.
//!
//! Where the class path comes from: the environment ([`CLASSPATH`], [`CLASSPATH_ALT`]); README,
//! "Beside real Java Redisson".

use std::{
    path::{Path, PathBuf},
    process::Command,
};

/// The variable with the class path of Redisson and its dependencies (the main version).
pub const CLASSPATH: &str = "REDISSON_CLASSPATH";
/// The variable with the class path of a second Redisson version.
pub const CLASSPATH_ALT: &str = "REDISSON_CLASSPATH_ALT";

/// A Redisson class path and the driver compiled against it.
#[derive(Debug, Clone)]
pub struct Java {
    /// The class path of Redisson and its dependencies.
    pub classpath: String,
    /// Where `build.sh` put the driver's classes.
    pub classes: PathBuf,
}

impl Java {
    /// The class path in the environment variable `var`, if set and not blank.
    pub fn classpath_from(var: &str) -> Option<String> {
        std::env::var(var).ok().filter(|v| !v.trim().is_empty())
    }

    /// Compiles the driver against `classpath` (`build.sh` keeps a build newer than the
    /// source), or says why it could not.
    pub fn build(classpath: &str) -> Result<Java, String> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("java/build.sh");
        let out = Command::new("bash")
            .arg(&script)
            .env(CLASSPATH, classpath)
            .output()
            .map_err(|e| format!("could not run {}: {e}", script.display()))?;
        if !out.status.success() {
            return Err(format!(
                "compat-tests/java/build.sh failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(Java {
            classpath: classpath.to_owned(),
            classes: PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()),
        })
    }

    /// The command that starts the driver on `url` with `extra` options before it, and
    /// `jvm` options for the JVM (e.g. `-XX:+UseSerialGC`).
    pub fn command(&self, jvm: &[&str], url: &str, extra: &[&str]) -> Command {
        let mut command = Command::new("java");
        command
            .args(jvm)
            .arg("-cp")
            .arg(format!("{}:{}", self.classpath, self.classes.display()))
            .arg("LockPeer")
            .args(extra)
            .arg(url);
        command
    }
}

/// The `version=` of a peer's `ready` line (Redisson's version for the Java driver, the
/// crate's for `lock-peer`).
pub fn version_of(ready: &str) -> Option<&str> {
    ready
        .split_whitespace()
        .find_map(|w| w.strip_prefix("version="))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_comes_from_the_ready_line() {
        assert_eq!(
            version_of("- ready OK id=abc version=3.52.0 watchdog_ms=30000"),
            Some("3.52.0")
        );
        assert_eq!(version_of("- ready OK id=abc"), None);
    }
}
