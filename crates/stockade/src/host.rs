//! What this host's kernel offers, read from its own answers (sysctls, `/proc`, the Landlock
//! ABI query): the facts `stockade doctor` checks and `stockade policy explain` states.
//!
//! Imports (layers): `sys`.

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

/// Whether this process is confined by a seccomp filter it did not install (a container
/// runtime's or systemd's): a refused jail step then names the profile to change.
pub(crate) fn under_seccomp_filter() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.strip_prefix("Seccomp:").is_some_and(|v| v.trim() != "0")))
}

/// The capabilities stockade uses when it runs as root, with what each is for.
pub const ROOT_CAPS: [(u32, &str, &str); 7] = [
    (7, "CAP_SETUID", "each run's user namespace owned by a uid of its own, its id maps"),
    (6, "CAP_SETGID", "the run's gid maps and groups"),
    (21, "CAP_SYS_ADMIN", "cloning the granted mounts, the cgroups"),
    (5, "CAP_KILL", "taking a run down (its processes have another uid)"),
    (1, "CAP_DAC_OVERRIDE", "the writable directories' copies, the cgroup files"),
    (0, "CAP_CHOWN", "the writable directories' copies, owned by the jail's uid"),
    (3, "CAP_FOWNER", "the writable directories' modes and times"),
];

/// The capabilities of [`ROOT_CAPS`] this process (as root) does not have in its effective set
/// (a container run with `--cap-drop`), by name. Empty when not root, or when all are there.
pub fn missing_root_caps() -> Vec<&'static str> {
    if crate::sys::geteuid() != 0 {
        return Vec::new();
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let eff = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        .unwrap_or(0);
    ROOT_CAPS.iter().filter(|(bit, _, _)| eff & (1 << bit) == 0).map(|(_, name, _)| *name).collect()
}

/// What to say when a step that needs a capability of root's was refused: the ones missing,
/// and where they went (empty: none is missing).
pub fn missing_caps_hint() -> String {
    let missing = missing_root_caps();
    if missing.is_empty() {
        return String::new();
    }
    format!(
        "; stockade runs as root without {}: a container dropped them (--cap-drop): give them back (docker/podman \
         --cap-add, Kubernetes securityContext.capabilities.add), or run stockade as a normal user",
        missing.join(", ")
    )
}

/// Mounts that hide parts of this process's `/proc` (a container's masked paths, systemd's
/// ProtectKernelTunables=): with any, the kernel refuses a fresh procfs in a new user namespace.
/// Mounts on the permanently empty directories procfs keeps for them (binfmt_misc, nfsd) do not
/// count.
pub fn proc_overmounts() -> Vec<String> {
    overmounts(&std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default())
}

fn overmounts(mountinfo: &str) -> Vec<String> {
    const EMPTY_DIRS: [&str; 4] = ["/proc/sys/fs/binfmt_misc", "/proc/fs/nfsd", "/proc/xen", "/proc/openprom"];
    mountinfo
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .filter(|m| m.starts_with("/proc/") && !EMPTY_DIRS.contains(m))
        .map(str::to_string)
        .collect()
}

/// What to change when a seccomp filter around stockade refuses a call a jail needs.
pub(crate) const SECCOMP_HINT: &str = "stockade runs under a seccomp filter it did not install (a container's or \
     systemd's); if that filter refused this step (a container runtime's default profile refuses what jails are \
     built with): run the container with contrib/container/seccomp.json (docker/podman: --security-opt \
     seccomp=seccomp.json; Kubernetes: seccompProfile type Localhost with contrib/kubernetes/seccomp.json); \
     under systemd, no RestrictNamespaces=yes, ProtectHostname= or SystemCallFilter= allow-list";

/// What to change when the kernel refuses a fresh /proc because parts of the one around are
/// hidden (a container's masked paths, systemd's ProtectKernelTunables=/ProtectKernelLogs=).
pub(crate) const PROC_HINT: &str = "the /proc stockade sees has hidden or read-only parts (a container's \
     masked paths, or systemd's ProtectKernelTunables=/ProtectKernelLogs=), and the kernel then refuses a fresh one: \
     docker: --security-opt systempaths=unconfined; podman: --security-opt unmask=ALL; Kubernetes: \
     securityContext.procMount: Unmasked (with hostUsers: false); on an AppArmor host also \
     --security-opt apparmor=unconfined (docker-default denies mount); or set filesystem.proc = \"none\"";

#[cfg(test)]
mod tests {
    #[test]
    fn overmounts_of_proc_are_what_hides_part_of_it() {
        let docker = "\
22 21 0:21 / /proc rw,nosuid - proc proc rw
23 22 0:5 /null /proc/kcore rw - devtmpfs udev rw
24 22 0:22 / /proc/acpi ro - tmpfs tmpfs ro
25 22 0:21 /sys /proc/sys ro - proc proc rw
26 22 0:23 / /proc/sys/fs/binfmt_misc rw - binfmt_misc binfmt_misc rw
27 21 0:24 / /procfoo rw - tmpfs tmpfs rw";
        assert_eq!(super::overmounts(docker), ["/proc/kcore", "/proc/acpi", "/proc/sys"]);
        assert!(super::overmounts("22 21 0:21 / /proc rw - proc proc rw").is_empty());
    }
}
