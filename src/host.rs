//! What this host's kernel offers, read from its own answers (sysctls, `/proc`, the Landlock
//! ABI query): the facts `stockade doctor` checks and `stockade policy explain` states.

pub(crate) fn read_trim(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// The kernel release, e.g. `6.18.44`.
pub fn kernel_release() -> String {
    read_trim("/proc/sys/kernel/osrelease").unwrap_or_else(|| "?".into())
}

pub(crate) fn kernel_at_least(release: &str, major: u32, minor: u32) -> bool {
    let mut it = release.split(|c: char| !c.is_ascii_digit()).filter_map(|x| x.parse::<u32>().ok());
    let (ma, mi) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (ma, mi) >= (major, minor)
}

/// Sysctls that turn user namespaces off, in words (empty: none does).
pub fn userns_restrictions() -> Vec<String> {
    let mut out = Vec::new();
    if read_trim("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        out.push("user.max_user_namespaces = 0 (nobody may create user namespaces)".into());
    }
    if read_trim("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        out.push("kernel.unprivileged_userns_clone = 0 (only root may)".into());
    }
    if read_trim("/proc/sys/kernel/apparmor_restrict_unprivileged_userns").as_deref() == Some("1") {
        out.push(
            "kernel.apparmor_restrict_unprivileged_userns = 1 (unprivileged callers need an AppArmor profile \
             granting `userns,`)"
                .into(),
        );
    }
    out
}

/// The seccomp actions this kernel has (`/proc/sys/kernel/seccomp/actions_avail`).
pub fn seccomp_actions() -> Option<String> {
    read_trim("/proc/sys/kernel/seccomp/actions_avail")
}

/// The Landlock ABI this kernel offers (0: none).
pub fn landlock_abi() -> u32 {
    crate::sys::landlock_abi()
}
