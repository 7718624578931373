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

/// Whether this process is confined by a seccomp filter it did not install (a container
/// runtime's or systemd's): a refused jail step then names the profile to change.
pub(crate) fn under_seccomp_filter() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .is_ok_and(|s| s.lines().any(|l| l.strip_prefix("Seccomp:").is_some_and(|v| v.trim() != "0")))
}

/// What to change when a seccomp filter around stockade refuses a call a jail needs.
pub(crate) const SECCOMP_HINT: &str = "a seccomp filter around stockade refused it (a container runtime's default \
     profile refuses what jails are built with): run the container with contrib/container/seccomp.json \
     (docker/podman: --security-opt seccomp=seccomp.json; Kubernetes: seccompProfile type Localhost with \
     contrib/kubernetes/seccomp.json); under systemd, no RestrictNamespaces=yes, ProtectHostname= or \
     SystemCallFilter= allow-list";

/// What to change when the kernel refuses a fresh /proc because parts of the one around are
/// hidden (a container's masked paths, systemd's ProtectKernelTunables=/ProtectProc=).
pub(crate) const PROC_HINT: &str = "the /proc stockade sees has hidden or read-only parts (a container's \
     masked paths, or systemd's ProtectKernelTunables=/ProcSubset=), and the kernel then refuses a fresh one: \
     docker: --security-opt systempaths=unconfined; podman: --security-opt unmask=ALL; Kubernetes: \
     securityContext.procMount: Unmasked (with hostUsers: false); on an AppArmor host also \
     --security-opt apparmor=unconfined (docker-default denies mount); or set filesystem.proc = \"none\"";
