#!/usr/bin/env python3
"""Runs the workspace's test targets a few at a time (the README's test command calls this).

`cargo test --workspace` runs one test binary after another. Most of the suite waits on
servers, timers and failovers rather than on the CPU, so running a few binaries side by side
cuts the wall time by more than half on 2 cores. Each target still runs its own tests the way
`cargo test` does (the same binary, the same harness, its tests in parallel threads); only the
targets overlap.

1. Builds everything once (`cargo test --workspace --all-features --no-run`).
2. Lists the test targets of every workspace package from cargo's JSON messages, plus each
   library's doc tests.
3. Runs `cargo test --workspace --all-features <--test N|--lib|--bins|--doc>` for each,
   `TEST_JOBS` at a time (default 3), longest first (by the durations of the last run on this
   machine, kept in target/test-durations.json, or by the hints below on a fresh checkout).
4. Prints one line per finished target, the whole output of a failed one, and a summary that
   counts passed, failed, ignored and skipped tests, and skipped parts of tests. A test that
   cannot run here says so with `redisson_lock_test_kit::skip` (test-kit/src/skip.rs), past
   the harness's capture: a line `SKIPPED test <name> (needs <VAR>): <why>` (e.g. the
   cross-language tests without Java) makes it a skipped test, not a passed one (the harness
   counts it passed); `SKIPPED part of <name> (<what>; needs <VAR>): <why>` a skipped part of
   a test that ran. The lines are found wherever they are in the output (the harness's quiet
   dots share their stream). Every such line is repeated at the end. A skip for want of a
   variable that is set (`REDISSON_CLASSPATH` where Java is expected, as in CI) fails its
   target and the run: no skip passes where what it lacked was given.

5. Stops a target that runs longer than `TEST_TARGET_TIMEOUT` seconds (default 600; the
   longest takes about 100 s on 2 cores): first the backtrace of every thread of its test
   process (gdb, when installed; a thread is named after its test), then SIGKILL to the
   target's whole process group (cargo, the test binary and every server or peer it started).
   The target fails with its output so far and the backtraces, and the others go on: a hung
   test shows where it hung instead of holding the whole run until CI's limit.

With arguments, runs only the targets whose label (`<package> --test <name>`, `workspace
--lib`...) contains one of them: `scripts/run-tests.py beside_java recipes_java`.

Exit status: 0 when every target passed.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# The lines of test-kit/src/skip.rs: `SKIPPED test <name> (needs <VAR>): <why>` and
# `SKIPPED part of <name> (<what>; needs <VAR>): <why>`, each up to its line's end (or up to
# another skip line written beside it).
SKIP_LINE = re.compile(r"SKIPPED (?:test|part of) .*?(?=SKIPPED (?:test|part of) |\n|$)")
SKIP_TEST = re.compile(r"^SKIPPED test (\S+) \(needs (?P<needs>\w+)\): ")
SKIP_PART = re.compile(r"^SKIPPED part of (\S+) \(.*; needs (?P<needs>\w+)\): ")
DURATIONS = os.path.join(ROOT, "target", "test-durations.json")
# Seconds, as measured on 2 cores; used only to order targets when no measurement is kept.
HINTS = {
    "redisson-lock --test explorer": 90,
    "redisson-lock --test watchdog": 60,
    "redisson-lock --test macro_ui": 45,
    "redisson-lock --test handoff": 32,
    "redisson-lock-chaos --test smoke": 32,
    "redisson-lock --test rlock": 31,
    "redisson-lock --test sentinel": 26,
    "redisson-lock --test rwlock": 23,
    "redisson-lock --test tls": 21,
    "redisson-lock --test cluster": 18,
    "compat-tests --test cross_process": 17,
    "compat-tests --test beside_java": 120,
    "workspace --doc": 30,
}


def target_timeout():
    try:
        return float(os.environ.get("TEST_TARGET_TIMEOUT", "600"))
    except ValueError:
        return 600.0


def group_processes(pgid):
    """(pid, ppid, command) of every process in the process group `pgid`."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        # The command name (field 2) may hold spaces: the fields after it follow its ')'.
        rest = stat[stat.rfind(")") + 2:].split()
        if len(rest) > 2 and int(rest[2]) == pgid:
            found.append((int(entry), int(rest[1]), cmd))
    return found


def hang_report(pgid):
    """What a hung target's processes are doing: the list of its process group and the
    backtraces of every thread of its test binaries (gdb, when installed)."""
    procs = group_processes(pgid)
    lines = ["processes of the target (pid, parent, command):"]
    lines += [f"  {pid} {ppid} {cmd[:200]}" for pid, ppid, cmd in procs]
    gdb = shutil.which("gdb")
    for pid, _, cmd in procs:
        exe = cmd.split(" ", 1)[0]
        if "/target/" not in exe or "/deps/" not in exe:
            continue  # only the test binaries (cargo's own, servers and peers left out)
        if not gdb:
            lines.append(f"(no gdb: no backtraces of {pid})")
            continue
        try:
            bt = subprocess.run(
                [gdb, "-p", str(pid), "-batch", "-nx", "-ex", "set pagination off",
                 "-ex", "thread apply all bt 40"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120,
            ).stdout
        except subprocess.TimeoutExpired:
            bt = "(gdb took more than 120 s)"
        lines.append(f"---- threads of {pid} ({exe}) ----\n{bt}")
    return "\n".join(lines)


def run_target(cmd, out, limit):
    """Runs `cmd` in a process group of its own; returns its exit code, or None after
    stopping it at `limit` seconds (the hang report written to `out` first)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        return proc.wait(timeout=limit)
    except subprocess.TimeoutExpired:
        out.flush()
        report = hang_report(proc.pid)
        out.write(f"\n==== still running after {limit:.0f} s (TEST_TARGET_TIMEOUT): stopped ====\n")
        out.write(report + "\n")
        out.flush()
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
        return None


def log(msg):
    print(msg, flush=True)


def targets():
    """(package, cargo selector args) for every test target of the workspace."""
    cmd = ["cargo", "test", "--workspace", "--all-features", "--no-run",
           "--message-format=json-render-diagnostics"]
    proc = subprocess.run(cmd, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        sys.exit(proc.returncode)
    found, kinds = [], set()
    for line in proc.stdout.splitlines():
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("reason") != "compiler-artifact" or not msg["profile"]["test"]:
            continue
        if not msg.get("executable"):
            continue
        # package_id: "path+file:///dir#name@version" (or "...#version" when the name is the
        # directory's): take the name from the manifest when the id has none.
        pid = msg["package_id"]
        frag = pid.split("#", 1)[1] if "#" in pid else ""
        pkg = frag.split("@", 1)[0] if "@" in frag else None
        if not pkg:
            pkg = package_name(msg["manifest_path"])
        kind, name = msg["target"]["kind"][0], msg["target"]["name"]
        if kind == "test":
            found.append((pkg, ["--test", name]))
        elif kind in ("lib", "proc-macro", "bin"):
            kinds.add("--lib" if kind != "bin" else "--bins")
    # Selected with `--workspace`, so every run resolves the features as the build did (a
    # `-p <package>` run would unify them differently and build some dependencies again).
    # The libraries' unit tests are one target, the binaries' another, the doc tests a third.
    found += [("workspace", [k]) for k in sorted(kinds)] + [("workspace", ["--doc"])]
    return found


_names = {}


def package_name(manifest):
    if manifest not in _names:
        with open(manifest) as f:
            text = f.read()
        m = re.search(r'^\[package\][^\[]*?^name\s*=\s*"([^"]+)"', text, re.M | re.S)
        _names[manifest] = m.group(1) if m else os.path.basename(os.path.dirname(manifest))
    return _names[manifest]


def label(pkg, sel):
    return " ".join([pkg] + sel)


def load_durations():
    try:
        with open(DURATIONS) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def tally(text):
    """The counts of one target's output: [passed, failed, ignored, skipped tests, skipped
    parts], its SKIPPED lines, and the skips for want of a variable that is set.

    Skip lines are found anywhere in the output, not only at a line's start: the harness's
    quiet dots and the skip lines share the stream. A test that said `SKIPPED test <name>`
    and passed is counted as skipped, not passed (one that failed after it stays failed)."""
    counts = [0, 0, 0, 0, 0]
    for m in re.finditer(r"test result: \w+\. (\d+) passed; (\d+) failed; (\d+) ignored", text):
        for i in range(3):
            counts[i] += int(m.group(i + 1))
    failed = set(re.findall(r"^---- (\S+) stdout ----", text, re.M))
    lines, unduly = [], []
    for m in SKIP_LINE.finditer(text):
        line = m.group(0).strip()
        lines.append(line)
        test, part = SKIP_TEST.match(line), SKIP_PART.match(line)
        found = test or part
        if found and is_set(found.group("needs")):
            unduly.append(line)
        if test and not any(test.group(1) in f.split("::") for f in failed):
            counts[3] += 1
        elif not test:
            counts[4] += 1
    counts[0] = max(0, counts[0] - counts[3])
    return counts, lines, unduly


def is_set(var):
    """What the tests take for a variable that is given (test-kit/src/skip.rs, `is_set`)."""
    return bool(os.environ.get(var, "").strip())


def main():
    jobs = max(1, int(os.environ.get("TEST_JOBS", "3")))
    limit = target_timeout()
    todo = targets()
    wanted = sys.argv[1:]
    if wanted:
        todo = [t for t in todo if any(w in label(*t) for w in wanted)]
        if not todo:
            log(f"no test target matches {wanted}")
            return 1
    known = {**HINTS, **load_durations()}
    todo.sort(key=lambda t: -known.get(label(*t), 5))
    log(f"running {len(todo)} test targets, {jobs} at a time")

    lock = threading.Lock()
    results = []  # (label, ok, seconds, counts, skipped lines)
    queue = list(todo)
    started = time.monotonic()

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                pkg, sel = queue.pop(0)
            name = label(pkg, sel)
            cmd = ["cargo", "test", "-q", "--workspace", "--all-features"] + sel
            t0 = time.monotonic()
            with tempfile.TemporaryFile(mode="w+") as out:
                code = run_target(cmd, out, limit)
                out.seek(0)
                text = out.read()
            secs = time.monotonic() - t0
            counts, skipped, unduly = tally(text)
            ok = code == 0 and not unduly
            if code is None:
                code = f"killed after {limit:.0f} s"
            with lock:
                results.append((name, ok, secs, counts, skipped, unduly))
                status = "ok  " if ok else "FAIL"
                extra = f", {counts[3]} skipped" if counts[3] else ""
                extra += f", {counts[4]} part(s) skipped" if counts[4] else ""
                log(f"{status} {name}  ({secs:.1f} s; {counts[0]} passed, {counts[2]} ignored"
                    f"{extra})")
                if not ok:
                    log(f"---- output of {name} (exit {code}) ----\n{text}\n---- end of {name} ----")
                for line in unduly:
                    log(f"FAIL {name}: skipped for want of a variable that is set: {line}")

    threads = [threading.Thread(target=worker) for _ in range(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    wall = time.monotonic() - started
    try:
        os.makedirs(os.path.dirname(DURATIONS), exist_ok=True)
        with open(DURATIONS, "w") as f:
            kept = load_durations()
            kept.update({r[0]: round(r[2], 1) for r in results})
            json.dump(kept, f, indent=1, sort_keys=True)
    except OSError:
        pass
    failed = [r for r in results if not r[1]]
    total = [sum(r[3][i] for r in results) for i in range(5)]
    skipped = [line for r in results for line in r[4]]
    parts = f", {total[4]} part(s) of tests skipped" if total[4] else ""
    log(f"\n{len(results)} targets in {wall:.0f} s: {total[0]} tests passed, "
        f"{total[1]} failed, {total[2]} ignored, {total[3]} skipped{parts}")
    for line in skipped:
        log(f"  {line}")
    unduly = [line for r in results for line in r[5]]
    if unduly:
        log(f"{len(unduly)} skip(s) for want of a variable that is set (Java was expected: "
            "no skip may pass):")
        for line in unduly:
            log(f"  {line}")
    if failed:
        log("FAILED targets: " + ", ".join(r[0] for r in failed))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
