//! Every command the README shows in an `sh` block runs as written — as root from a home directory
//! of root's (`0700`, like `/root`) and as a normal user from theirs, with a clean environment and
//! `stockade` on the PATH — and where the README shows a command's output in the `text` block that
//! follows, that is the output. The set-up (`./setup.sh`) and test (`cargo ...`) blocks are not
//! run here: CI runs the one and is the other.
//!
//! The normal user is a uid with no other use, given what a systemd host gives a user session with
//! `Delegate=yes`: a cgroup of its own in each hierarchy (v1 controllers; on a pure cgroup v2
//! host the CLI also needs `--cgroup-parent`, so that part skips there). Needs root (to be the
//! other user, and to make that cgroup) and the system guest directory that `stockade guest
//! install` (as root) fills; says so and skips without them.

mod common;

use common::*;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use stockade::layers::cgroup::host::{self as cgroup_host, Host};

/// The normal user the commands also run as: no passwd entry, no files anywhere else.
const USER: u32 = 64_123;

/// The README's code blocks: (language, body, the `text` block right after it, if any).
fn blocks() -> Vec<(String, String, Option<String>)> {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).expect("README");
    let mut out: Vec<(String, String, Option<String>)> = Vec::new();
    let mut lines = readme.lines();
    while let Some(line) = lines.next() {
        let Some(lang) = line.strip_prefix("```") else { continue };
        let body: Vec<&str> = lines.by_ref().take_while(|l| !l.starts_with("```")).collect();
        let body = body.join("\n");
        if lang == "text" && out.last().is_some_and(|(l, _, t)| l == "sh" && t.is_none()) {
            if let Some(last) = out.last_mut() {
                last.2 = Some(body);
            }
            continue;
        }
        out.push((lang.to_string(), body, None));
    }
    out.into_iter()
        .filter(|(lang, body, _)| {
            let first = body.lines().next().unwrap_or("");
            lang == "sh" && !first.starts_with("./setup.sh") && !first.starts_with("cargo ")
        })
        .collect()
}

/// A directory anyone may enter, holding `stockade` (a copy of the built binary: the build tree
/// may be where a normal user cannot reach).
fn bin_dir() -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    std::fs::copy(stockade_bin(), d.path().join("stockade")).expect("copy stockade");
    d
}

/// A home directory of `uid`'s own, mode 0700.
fn home(uid: u32) -> tempfile::TempDir {
    let d = tempfile::tempdir().expect("tempdir");
    std::os::unix::fs::chown(d.path(), Some(uid), Some(uid)).expect("chown home");
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o700)).expect("chmod");
    d
}

/// The shell a block runs in: `sh -e`, echoing each command, in `home`, with only HOME, PATH
/// and LANG set. `prefix` comes first (`exec `, or joining the user's cgroups and dropping to it).
fn shell(bin: &Path, home: &Path, prefix: &str, script: &str) -> std::process::Output {
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", bin.display());
    Command::new("/bin/sh")
        .args([
            "-c",
            &format!("{prefix}env -i HOME={h} PATH={path} LANG=C.UTF-8 /bin/sh -ex -c \"$0\"", h = home.display()),
        ])
        .arg(script)
        .current_dir(home)
        .stdin(Stdio::null())
        .output()
        .expect("sh")
}

/// The README's blocks run one user at a time: its TCP example listens on one port.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn check(who: &str, bin: &Path, home: &Path, prefix: &str) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for (_, body, expected) in blocks() {
        let out = shell(bin, home, prefix, &body);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "as {who}, this README block failed:\n{body}\n--- stdout\n{stdout}\n--- stderr\n{stderr}"
        );
        if let Some(text) = expected {
            assert_eq!(stdout.trim_end(), text.trim_end(), "as {who}, the README shows another output for:\n{body}");
        }
    }
}

/// Whether the guests a normal user would use are installed (`sudo stockade guest install`).
fn system_guests() -> bool {
    let dir = Path::new(stockade::wasm::guests::SYSTEM_DIR);
    if !dir.join("python314.wasm").exists() {
        eprintln!("skip: the system guest directory {} has no guests (stockade guest install, as root)", dir.display());
        return false;
    }
    true
}

#[test]
fn readme_commands_work_as_root_from_a_private_home() {
    if !is_root() {
        eprintln!("skip: runs the README as root and as another user; needs root");
        return;
    }
    if !system_guests() {
        return;
    }
    let bin = bin_dir();
    let home = home(0);
    check("root", bin.path(), home.path(), "exec ");
}

/// Cgroups of the user's own, one per v1 hierarchy, below this process's: what `Delegate=yes`
/// gives a session. Removed when dropped (after killing what is left in them).
struct Delegated(Vec<PathBuf>);

impl Delegated {
    fn new(uid: u32) -> Option<Delegated> {
        let host = Host::current();
        if host.v1.is_empty() {
            return None;
        }
        let mut dirs = Vec::new();
        let mut seen_mounts = Vec::new();
        // The controllers stockade limits or accounts with (a cpuset child, say, would need its
        // cpus and mems set before anything may join it).
        for h in ["memory", "pids", "cpu", "cpuacct"].iter().filter_map(|c| host.v1.get(*c)) {
            if seen_mounts.contains(&h.mount) {
                continue;
            }
            seen_mounts.push(h.mount.clone());
            let parent = h.dir(&h.own)?;
            let dir = parent.join(format!("readme-user-{}", std::process::id()));
            std::fs::create_dir(&dir).ok()?;
            dirs.push(dir.clone());
            for f in std::iter::once(dir.clone()).chain(["cgroup.procs", "tasks"].map(|n| dir.join(n))) {
                let _ = std::os::unix::fs::chown(&f, Some(uid), Some(uid));
            }
        }
        Some(Delegated(dirs))
    }

    /// Shell commands moving the shell into every one of these cgroups.
    fn join(&self) -> String {
        self.0.iter().map(|d| format!("echo $$ > {}/cgroup.procs && ", d.display())).collect()
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        for d in &self.0 {
            let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap_or_default();
            for pid in procs.lines().filter_map(|l| l.trim().parse::<i32>().ok()) {
                let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            }
            remove_cgroup(d);
        }
    }
}

/// Removes a cgroup, the leaves stockade left in it first (none, if it cleaned up).
fn remove_cgroup(d: &Path) {
    if let Ok(entries) = std::fs::read_dir(d) {
        for e in entries.flatten().filter(|e| e.path().is_dir()) {
            let _ = std::fs::remove_dir(e.path());
        }
    }
    let _ = std::fs::remove_dir(d);
}

/// Whether this test can run commands as another user with the system's guests (saying why
/// not, when not).
fn can_become_a_user() -> bool {
    if !is_root() {
        eprintln!("skip: runs commands as another user; needs root to become it");
        return false;
    }
    if !system_guests() {
        return false;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        eprintln!("skip: setpriv (util-linux) is not installed");
        return false;
    }
    true
}

#[test]
fn readme_commands_work_as_a_normal_user_from_their_home() {
    if !can_become_a_user() {
        return;
    }
    let Some(delegated) = Delegated::new(USER) else {
        eprintln!("skip: no cgroup v1 hierarchy to delegate here (pure cgroup v2: the CLI needs --cgroup-parent)");
        return;
    };
    let bin = bin_dir();
    let home = home(USER);
    let prefix = format!("{}exec setpriv --reuid={USER} --regid={USER} --clear-groups ", delegated.join());
    check("a normal user", bin.path(), home.path(), &prefix);
    // Everything the user's runs wrote is the user's.
    let foreign: Vec<String> = walk(home.path())
        .into_iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok_and(|m| m.uid() != USER))
        .map(|p| p.display().to_string())
        .collect();
    assert!(foreign.is_empty(), "files in the user's home not owned by the user: {foreign:?}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(walk(&p));
        }
        out.push(p);
    }
    out
}

/// Another uid with no other use: it gets no delegated cgroup.
const UNDELEGATED: u32 = 64_124;

/// A normal user with no cgroup of their own, as `useradd` makes one: every run is refused,
/// saying why and how to fix it; `stockade doctor` prints the commands for this host; the fix
/// (a cgroup root hands the user, here below this process's own) makes the same run work, and
/// `--cgroups-best-effort` runs without the limits, every report saying so. The same for
/// `stockade serve` (its `--check` builds every runtime's jail plan).
#[test]
fn a_user_without_delegation_is_refused_with_the_fix() {
    if !can_become_a_user() {
        return;
    }
    let host = Host::current();
    if host.v1.is_empty() {
        eprintln!("skip: no cgroup v1 hierarchy here (on cgroup v2 the fix is a systemd scope, not tried here)");
        return;
    }
    let bin = bin_dir();
    let home = home(UNDELEGATED);
    let prefix = format!("exec setpriv --reuid={UNDELEGATED} --regid={UNDELEGATED} --clear-groups ");
    let as_user = |script: &str| shell(bin.path(), home.path(), &prefix, script);

    let out = as_user("stockade run --python 'print(1)'");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(125), "{stderr}");
    assert!(stderr.contains("not delegated") && stderr.contains("--cgroups-best-effort"), "{stderr}");
    assert!(stderr.contains("`stockade doctor` prints the commands for this host"), "{stderr}");

    let out = as_user("stockade doctor || true");
    let doctor = String::from_utf8_lossy(&out.stdout);
    let fix = doctor.lines().find(|l| l.contains("fix: as root, once:")).unwrap_or_default();
    assert!(fix.contains(&format!("--cgroup-parent /stockade-{UNDELEGATED}")), "{doctor}");
    assert!(fix.contains("chown") && fix.contains("--cgroups-best-effort"), "{doctor}");

    let out = as_user("stockade serve --check --listen unix:$HOME/api.sock");
    assert!(!out.status.success(), "serve --check passed without cgroups: {}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not delegated"), "{}", String::from_utf8_lossy(&out.stderr));

    // Without the limits, said in every report.
    let out = as_user("stockade run --cgroups-best-effort --report - -- /bin/true");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a report");
    let cgroup = report["enforcement"].as_array().and_then(|l| l.iter().find(|l| l["layer"] == "cgroup")).cloned();
    assert_eq!(cgroup.as_ref().map(|c| c["status"].clone()), Some(serde_json::json!("not-enforced")), "{report}");
    let out = as_user("stockade serve --check --cgroups-best-effort --listen unix:$HOME/api.sock");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    // The fix doctor printed, below this process's own cgroups (this machine's rule), and the
    // parent it names: the run works, limited.
    let handed = Handed::new(UNDELEGATED, &host).expect("a cgroup to hand over");
    let out = as_user(&format!("stockade run --cgroup-parent {} --python 'print(6 * 7)'", handed.parent));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");
}

/// What `stockade doctor`'s fix does on a v1 host: a cgroup in each hierarchy, the user's, with
/// its `cgroup.procs` and `tasks` — here below this process's own. Removed when dropped.
struct Handed {
    parent: String,
    dirs: Vec<PathBuf>,
}

impl Handed {
    /// One path (`--cgroup-parent` names one for every hierarchy): below the deepest of this
    /// process's own cgroups, made in each hierarchy (with the levels missing there).
    fn new(uid: u32, host: &Host) -> Option<Handed> {
        let controllers: Vec<&cgroup_host::Hierarchy> =
            ["memory", "pids", "cpu"].iter().filter_map(|c| host.v1.get(*c)).collect();
        let deepest = controllers.iter().map(|h| h.own.as_str()).max_by_key(|o| o.len())?;
        let parent = format!("{}/stockade-{uid}-{}", deepest.trim_end_matches('/'), std::process::id());
        let mut dirs: Vec<PathBuf> = Vec::new();
        for h in controllers {
            let own = h.dir(&h.own)?;
            let target = h.dir(&parent)?;
            let mut at = own.clone();
            for part in target.strip_prefix(&own).ok()?.components() {
                at = at.join(part);
                if !at.exists() {
                    std::fs::create_dir(&at).ok()?;
                    dirs.push(at.clone());
                }
            }
            for f in [target.clone(), target.join("cgroup.procs"), target.join("tasks")] {
                let _ = std::os::unix::fs::chown(&f, Some(uid), Some(uid));
            }
        }
        Some(Handed { parent, dirs })
    }
}

impl Drop for Handed {
    fn drop(&mut self) {
        // The deepest first.
        for d in self.dirs.iter().rev() {
            remove_cgroup(d);
        }
    }
}
