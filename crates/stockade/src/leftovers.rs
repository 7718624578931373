//! Names for what a supervisor leaves on the host while a run is live (its cgroup leaves), so the
//! next supervisor can tell a live owner's from a killed one's and reap it.
//!
//! A name carries the owner's pid and its start time (clock ticks since boot): together they name
//! one process, so a recycled pid never makes a dead owner look alive.
//!
//! Imports (layers): none.

/// This process's start time (clock ticks since boot), from `/proc/PID/stat`.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.split(' ').nth(19)?.parse().ok()
}

/// The process what this one leaves belongs to: itself, or for a helper
/// ([`crate::helper::fork_helper`]) the process it was forked from (learned before the fork, and
/// inherited): a helper's leftovers are its maker's, reaped once the maker is gone.
pub(crate) fn owner() -> (u32, u64) {
    static OWNER: std::sync::OnceLock<(u32, u64)> = std::sync::OnceLock::new();
    *OWNER.get_or_init(|| {
        let me = std::process::id();
        (me, start_time(me).unwrap_or(0))
    })
}

/// `PREFIX-PID-START`: the owner part of a name for this process ([`owner`]); in a helper,
/// followed by `-hPID.START`, the helper's own, so that helpers of one owner never pick the same
/// name (each counts its names from the same number, inherited).
pub(crate) fn owner_tag(prefix: &str) -> String {
    let (pid, start) = owner();
    let me = std::process::id();
    if me == pid {
        format!("{prefix}-{pid}-{start}")
    } else {
        format!("{prefix}-{pid}-{start}-h{me}.{}", start_time(me).unwrap_or(0))
    }
}

/// The entries of `dir` named `PREFIX-PID-START...` whose supervisor is gone: what to reap.
/// Each owner is looked up once per call (a directory holds many names of one owner).
pub(crate) fn of_gone_owners(dir: &std::path::Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut seen = std::collections::HashMap::new();
    let mut gone = |pid: u32| *seen.entry(pid).or_insert_with(|| start_time(pid));
    entries
        .flatten()
        .filter(|e| owner_is_gone(prefix, &e.file_name().to_string_lossy(), &mut gone))
        .map(|e| e.path())
        .collect()
}

/// Whether `name` (starting with `PREFIX-PID-START`) belongs to a supervisor that is gone;
/// `started(pid)`: when that process started, if it is there. Names that do not parse are never
/// someone's leftovers.
/// A helper's name (`-hPID.START` after the owner's) is gone too when the helper is: its maker
/// may live on (a spawner killed under a running server).
fn owner_is_gone(prefix: &str, name: &str, started: &mut dyn FnMut(u32) -> Option<u64>) -> bool {
    let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else { return false };
    let mut parts = rest.split('-');
    let (Some(pid), Some(start)) = (parts.next(), parts.next()) else { return false };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { return false };
    if started(pid) != Some(start) {
        return true;
    }
    let helper = parts.next().and_then(|h| h.strip_prefix('h')).and_then(|h| h.split_once('.'));
    match helper.map(|(p, s)| (p.parse::<u32>(), s.parse::<u64>())) {
        Some((Ok(pid), Ok(start))) => started(pid) != Some(start),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner_is_gone(prefix: &str, name: &str) -> bool {
        super::owner_is_gone(prefix, name, &mut start_time)
    }

    #[test]
    fn own_tag_is_alive_and_a_dead_pid_is_gone() {
        let tag = owner_tag("x");
        assert!(!owner_is_gone("x", &format!("{tag}-7")));
        // Same pid, another start time: a recycled pid.
        let me = std::process::id();
        assert!(owner_is_gone("x", &format!("x-{me}-1-7")));
        assert!(!owner_is_gone("x", "x-notapid-1"));
        assert!(!owner_is_gone("x", "y-1-1"));
        assert!(!owner_is_gone("x", "xy-1-1"));
        // A live owner's helper: gone with the helper, kept while it lives.
        assert!(owner_is_gone("x", &format!("{tag}-h{me}.1-7")));
        let mine = start_time(me).expect("own start");
        assert!(!owner_is_gone("x", &format!("{tag}-h{me}.{mine}-7")));
        assert!(!owner_is_gone("x", &format!("{tag}-hx.y-7")));
    }
}
