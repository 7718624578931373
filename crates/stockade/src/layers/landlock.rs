//! Landlock: the kernel's own check of every path the program opens, mirroring the visible tree.
//!
//! Read-only grants get read + execute (read only with `process.exec-allow`: the listed files
//! get execute, see `exec.rs`), writable grants (and `/tmp`) get write (execute only with
//! `filesystem.writable-exec`), device nodes get read/write as they need, nothing else. TCP
//! bind/connect is denied where the ABI has it (4+), abstract-unix-socket and signal scoping
//! where it has them (6+).
//!
//! The ruleset is built per run in the parent with the `landlock` crate, with rules on the host
//! inodes the binds show (a bind shares its inode). Objects that exist only inside the jail —
//! its root tmpfs, `/tmp`, `/dev/shm` and the staged writable directories — cannot be opened
//! before fork, so the child adds those rules itself (`open(O_PATH)` + `landlock_add_rule` on
//! masks computed here) and then calls `landlock_restrict_self` on the prepared fd.

use crate::layers::filesystem::{FsPlan, SourceKind};
use crate::layers::{Enforcement, LayerReport};
use crate::policy::Policy;
use crate::sys::{self, Errno};
use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope,
};
use std::ffi::CString;
use std::os::fd::{AsFd, OwnedFd, RawFd};

/// The newest ABI whose restrictions stockade asks for (6: filesystem, TCP, scoping). Later ABIs
/// add logging and thread sync, which change nothing the program can do.
pub const BEST_ABI: u32 = 6;

#[derive(Debug, thiserror::Error)]
pub enum LandlockError {
    #[error(
        "landlock: the policy needs Landlock ABI {min} ({feature}) but this kernel has {kernel}; run on a newer \
         kernel, or relax landlock.min-abi (or set landlock.required = false to run with what the kernel has)"
    )]
    Required { min: u32, kernel: String, feature: &'static str },
    #[error("landlock: cannot build the ruleset: {0}")]
    Ruleset(#[from] landlock::RulesetError),
    #[error("landlock: cannot open {path} for its execute rule (process.exec-allow): {source}")]
    ExecFile { path: std::path::PathBuf, source: std::io::Error },
}

/// What the kernel offers at each ABI, for messages.
fn feature(abi: u32) -> &'static str {
    match abi {
        0 | 1 => "filesystem rules",
        2 => "filesystem rules with cross-directory rename/link control",
        3 => "truncate control",
        4 => "TCP bind/connect rules",
        5 => "device ioctl control",
        _ => "abstract-unix-socket and signal scoping",
    }
}

#[derive(Debug, Clone)]
pub struct LandlockPlan {
    kernel_abi: u32,
    applied_abi: u32,
    min_abi: u32,
    deny_tcp: bool,
    /// The one TCP port `connect` may reach (the egress proxy's), where TCP is denied.
    connect_port: Option<u16>,
    /// Masks (kernel bits) for the child's own rules, already limited to what is handled.
    root_access: u64,
    tmp_access: u64,
    /// Inside paths the child adds rules for: the root, then the jail's own writable mounts.
    child_rules: Vec<(CString, u64)>,
    status: Enforcement,
    reason: Option<String>,
    grants: usize,
    /// `process.exec-allow`: the only files with the execute right (see `exec.rs`).
    exec_only: Option<Vec<std::path::PathBuf>>,
}

fn rw_access(abi: ABI, exec: bool) -> BitFlags<AccessFs> {
    let all = AccessFs::from_all(abi);
    if exec { all } else { all & !AccessFs::Execute }
}

/// Checks the kernel against the policy; refuses when Landlock is required but below `min-abi`.
pub fn prepare(policy: &Policy, fs: &FsPlan) -> Result<LandlockPlan, LandlockError> {
    let ll = &policy.landlock;
    let kernel_abi = sys::landlock_abi();
    let applied_abi = kernel_abi.min(BEST_ABI);
    let abi = ABI::from(i32::try_from(applied_abi).unwrap_or(0));
    let (status, reason) = if kernel_abi >= ll.min_abi {
        (Enforcement::Enforced, None)
    } else if ll.required {
        let kernel = if kernel_abi == 0 { "no Landlock".to_string() } else { format!("ABI {kernel_abi}") };
        return Err(LandlockError::Required { min: ll.min_abi, kernel, feature: feature(ll.min_abi) });
    } else if kernel_abi == 0 {
        (Enforcement::NotEnforced, Some("this kernel has no Landlock (landlock.required = false)".to_string()))
    } else {
        let missing = (kernel_abi + 1..=ll.min_abi).map(feature).collect::<Vec<_>>().join(", ");
        (
            Enforcement::Partial,
            Some(format!(
                "this kernel has Landlock ABI {kernel_abi}, below landlock.min-abi = {}: no {missing} \
                 (landlock.required = false)",
                ll.min_abi
            )),
        )
    };
    let root_access = (AccessFs::ReadFile | AccessFs::ReadDir) & AccessFs::from_all(abi);
    let tmp_access = rw_access(abi, policy.filesystem.writable_exec);
    let mut child_rules = Vec::new();
    if fs.enabled() && kernel_abi > 0 {
        child_rules.push((c"/".to_owned(), root_access.bits()));
        for path in fs.own_writable() {
            let c = CString::new(path.as_os_str().as_encoded_bytes()).unwrap_or_default();
            child_rules.push((c, tmp_access.bits()));
        }
    }
    Ok(LandlockPlan {
        kernel_abi,
        applied_abi,
        min_abi: ll.min_abi,
        deny_tcp: !policy.seccomp.allow_network(),
        connect_port: policy.network.egress().then_some(crate::layers::network::PROXY_PORT),
        root_access: root_access.bits(),
        tmp_access: tmp_access.bits(),
        child_rules,
        status,
        reason,
        grants: fs.sources().len(),
        exec_only: None,
    })
}

impl LandlockPlan {
    /// Gives the execute right to `files` alone (`process.exec-allow`, see `exec.rs`): the
    /// read-only grants lose it.
    pub fn exec_only(&mut self, files: Vec<std::path::PathBuf>) {
        self.exec_only = Some(files);
    }

    /// Whether the child restricts itself at all.
    pub fn active(&self) -> bool {
        self.kernel_abi > 0 && self.status != Enforcement::NotEnforced
    }

    /// Builds this run's ruleset (a fresh one per run: the child adds rules to it). `None` when
    /// Landlock is not applied.
    pub fn build_ruleset(&self, fs: &FsPlan, writable_exec: bool) -> Result<Option<OwnedFd>, LandlockError> {
        if !self.active() {
            return Ok(None);
        }
        let err = LandlockError::Ruleset;
        let abi = ABI::from(i32::try_from(self.applied_abi).unwrap_or(0));
        let mut ruleset = Ruleset::default().set_compatibility(CompatLevel::BestEffort);
        ruleset = ruleset.handle_access(AccessFs::from_all(abi)).map_err(err)?;
        if self.deny_tcp && self.applied_abi >= 4 {
            ruleset = ruleset.handle_access(AccessNet::from_all(abi)).map_err(err)?;
        }
        if self.applied_abi >= 6 {
            ruleset = ruleset.scope(Scope::from_all(abi)).map_err(err)?;
        }
        let mut created = ruleset.create().map_err(err)?;
        for (file, kind) in fs.sources() {
            let access = match kind {
                SourceKind::ReadOnly if self.exec_only.is_some() => AccessFs::from_read(abi) & !AccessFs::Execute,
                SourceKind::ReadOnly => AccessFs::from_read(abi),
                SourceKind::Writable => rw_access(abi, writable_exec),
                SourceKind::Device { writable: true } => {
                    (AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::Truncate | AccessFs::IoctlDev)
                        & AccessFs::from_all(abi)
                }
                SourceKind::Device { writable: false } => {
                    (AccessFs::ReadFile | AccessFs::IoctlDev) & AccessFs::from_all(abi)
                }
            };
            created = created.add_rule(PathBeneath::new(file.as_fd(), access)).map_err(err)?;
        }
        for path in self.exec_only.iter().flatten() {
            let file =
                std::fs::File::open(path).map_err(|source| LandlockError::ExecFile { path: path.clone(), source })?;
            let access = (AccessFs::Execute | AccessFs::ReadFile) & AccessFs::from_all(abi);
            created = created.add_rule(PathBeneath::new(file.as_fd(), access)).map_err(err)?;
        }
        if let Some(port) = self.connect_port.filter(|_| self.deny_tcp && self.applied_abi >= 4) {
            created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp)).map_err(err)?;
        }
        Ok(created.into())
    }

    pub fn report(&self) -> LayerReport {
        let asked = format!(
            "ABI >= {} ({}); newer features applied when the kernel has them (up to ABI {BEST_ABI}): {} \
             path rules{}, tmp and root rules{}, abstract-unix and signal scoping",
            self.min_abi,
            feature(self.min_abi),
            self.grants,
            match &self.exec_only {
                Some(f) => format!(
                    ", execute only of {} file(s) (process.exec-allow, their ELF interpreters, the program)",
                    f.len()
                ),
                None => String::new(),
            },
            match (self.deny_tcp, self.connect_port) {
                (true, Some(port)) => format!(", TCP bind denied and connect only to port {port} (the egress proxy)"),
                (true, None) => ", TCP bind/connect denied".to_string(),
                (false, _) => String::new(),
            }
        );
        let applied = if self.kernel_abi == 0 {
            "none: no Landlock in this kernel".to_string()
        } else {
            let tcp = match (self.deny_tcp, self.applied_abi >= 4, self.connect_port) {
                (false, _, _) => "TCP not restricted (network allowed)".to_string(),
                (true, true, Some(port)) => format!("TCP bind denied, connect only to port {port}"),
                (true, true, None) => "TCP bind/connect denied".to_string(),
                (true, false, Some(_)) => {
                    "TCP rules unavailable (ABI < 4): connect not pinned to the proxy's port (the network \
                     namespace and the filter still hold)"
                        .to_string()
                }
                (true, false, None) => "TCP rules unavailable (ABI < 4)".to_string(),
            };
            let scope = if self.applied_abi >= 6 { "scoped" } else { "no scoping (ABI < 6)" };
            let truncate = if self.applied_abi >= 3 { "truncate controlled" } else { "no truncate control (ABI < 3)" };
            format!(
                "ABI {} (kernel {}): filesystem rules, {truncate}; {tcp}; {scope}",
                self.applied_abi, self.kernel_abi
            )
        };
        let mut r = LayerReport::new("landlock", &asked, &applied);
        if let Some(reason) = &self.reason {
            r = r.with_status(self.status, reason);
        }
        r
    }

    #[doc(hidden)]
    pub fn masks(&self) -> (u64, u64) {
        (self.root_access, self.tmp_access)
    }
}

/// Child side: add the rules for the jail's own objects, then restrict. On failure returns the
/// index of the rule that failed (or the count, for restrict_self) and the errno.
pub fn apply(plan: &LandlockPlan, ruleset: Option<RawFd>) -> Result<(), (u32, Errno)> {
    let Some(ruleset) = ruleset else { return Ok(()) };
    for (i, (path, access)) in plan.child_rules.iter().enumerate() {
        let step = u32::try_from(i).unwrap_or(u32::MAX);
        let fd = sys::open_path(path).map_err(|e| (step, e))?;
        let added = sys::landlock_add_path_rule(ruleset, fd, *access);
        sys::close(fd);
        added.map_err(|e| (step, e))?;
    }
    let step = u32::try_from(plan.child_rules.len()).unwrap_or(u32::MAX);
    sys::landlock_restrict_self(ruleset).map_err(|e| (step, e))
}

impl LandlockPlan {
    /// Words for a failed step.
    pub fn step_name(&self, step: u32) -> String {
        match self.child_rules.get(step as usize) {
            Some((path, _)) => format!("rule for {}", path.to_string_lossy()),
            None => "landlock_restrict_self".into(),
        }
    }
}
