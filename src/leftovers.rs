//! Names for what a supervisor leaves on the host while a run is live (its cgroup leaves), so the
//! next supervisor can tell a live owner's from a killed one's and reap it.
//!
//! A name carries the owner's pid and its start time (clock ticks since boot): together they name
//! one process, so a recycled pid never makes a dead owner look alive.

/// This process's start time (clock ticks since boot), from `/proc/PID/stat`.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.split(' ').nth(19)?.parse().ok()
}

/// `PREFIX-PID-START`: the owner part of a name for this process.
pub(crate) fn owner_tag(prefix: &str) -> String {
    let me = std::process::id();
    format!("{prefix}-{me}-{}", start_time(me).unwrap_or(0))
}

/// The entries of `dir` named `PREFIX-PID-START...` whose supervisor is gone: what to reap.
pub(crate) fn of_gone_owners(dir: &std::path::Path, prefix: &str) -> Vec<std::path::PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries.flatten().filter(|e| owner_is_gone(prefix, &e.file_name().to_string_lossy())).map(|e| e.path()).collect()
}

/// Whether `name` (starting with `PREFIX-PID-START`) belongs to a supervisor that is gone.
/// Names that do not parse are never someone's leftovers.
fn owner_is_gone(prefix: &str, name: &str) -> bool {
    let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('-')) else { return false };
    let mut parts = rest.split('-');
    let (Some(pid), Some(start)) = (parts.next(), parts.next()) else { return false };
    let (Ok(pid), Ok(start)) = (pid.parse::<u32>(), start.parse::<u64>()) else { return false };
    start_time(pid) != Some(start)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }
}
