//! `PolicyFile` -> `Policy`: every value checked, every error collected with its key path.

use super::egress::{EgressRule, MAX_EGRESS_RULES};
use super::file::{
    CgroupsFile, FilesystemFile, IdentityFile, Limit, Namespaces, NetworkFile, OverCap, PolicyFile, ProcMode,
    RlimitKey, StdinMode, SyscallGroup, WasmFile,
};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

/// The longest wall-clock limit a policy may set: one week.
pub const MAX_WALL_TIMEOUT_MS: u64 = 7 * 24 * 3600 * 1000;

/// A validated policy: what the jail will do, in typed form. Build it with [`Policy::builtin`],
/// [`Policy::load`] or [`Policy::from_toml`]; adjust it with the `add_*`/`set_*` methods.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Where this policy came from (a file path, or `builtin:default`), for messages.
    pub origin: String,
    pub namespaces: Namespaces,
    pub identity: Identity,
    pub filesystem: Filesystem,
    pub wall_timeout: Duration,
    /// Resource limits in the order they are applied.
    pub rlimits: Vec<(RlimitKey, Limit)>,
    pub stdout_max_bytes: Option<u64>,
    pub stderr_max_bytes: Option<u64>,
    /// Whether writing past an output cap ends the run (`output.over-cap`).
    pub over_cap: OverCap,
    pub env_pass: Vec<String>,
    pub env_set: Vec<(String, String)>,
    pub hostname: String,
    pub stdin: StdinMode,
    /// The files the program may exec after it starts (`process.exec-allow`), as written.
    pub exec_allow: Vec<PathBuf>,
    pub landlock: LandlockPolicy,
    pub seccomp: SeccompPolicy,
    pub cgroups: CgroupPolicy,
    pub wasm: WasmPolicy,
    pub network: NetworkPolicy,
}

/// What the jail may reach: the hosts of its egress proxy, and its caps. No host: no network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkPolicy {
    /// In the file's order (a warning names its index), without repeats.
    pub egress_allow: Vec<EgressRule>,
    pub egress_max_connections: u32,
    pub egress_max_bytes: u64,
}

impl NetworkPolicy {
    /// Whether the jail gets its egress proxy (some host is listed).
    pub fn egress(&self) -> bool {
        !self.egress_allow.is_empty()
    }
}

/// The most connections `network.egress-max-connections` may allow a run.
pub const MAX_EGRESS_CONNECTIONS: u32 = 4096;

/// The Wasm runtime's limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WasmPolicy {
    pub memory_max_bytes: u64,
    pub fuel: Option<u64>,
    pub table_elements_max: u64,
    pub instances_max: u32,
    pub module_max_bytes: u64,
    /// The Python modules in the guest's view (`None`: the whole standard library), sorted,
    /// without repeats.
    pub python_modules: Option<Vec<String>>,
}

/// The run's cgroup and its limits (`None`: no limit).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupPolicy {
    pub enabled: bool,
    pub best_effort: bool,
    /// A cgroup path (as in /proc/self/cgroup); `None`: the caller's own cgroup.
    pub parent: Option<String>,
    pub memory_max_bytes: Option<u64>,
    pub pids_max: Option<u64>,
    /// (quota, period) in microseconds.
    pub cpu_max_us: Option<(u64, u64)>,
}

/// Landlock requirements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LandlockPolicy {
    pub required: bool,
    pub min_abi: u32,
}

/// Seccomp groups: every group is denied (EPERM) unless in `allow`; those in `kill` end the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeccompPolicy {
    pub required: bool,
    pub allow: Vec<SyscallGroup>,
    pub kill: Vec<SyscallGroup>,
}

impl SeccompPolicy {
    /// Whether the program may open non-unix sockets.
    pub fn allow_network(&self) -> bool {
        self.allow.contains(&SyscallGroup::Network)
    }

    /// Whether exec after the first is denied.
    pub fn deny_exec(&self) -> bool {
        !self.allow.contains(&SyscallGroup::Exec)
    }
}

/// Inside ids and the host ids they map to when stockade runs as root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    pub uid: u32,
    pub gid: u32,
    pub host_uid: u32,
    pub host_gid: u32,
    /// The host uids that own the runs' user namespaces (first, count); `None`: the caller.
    pub owner_uids: Option<(u32, u32)>,
}

/// The jail's filesystem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Filesystem {
    pub grants: Vec<Grant>,
    pub writable_exec: bool,
    pub proc: ProcMode,
    pub dev: bool,
    /// `None`: no `/tmp`.
    pub tmp_size_bytes: Option<u64>,
    /// `None`: no `/dev/shm`.
    pub shm_size_bytes: Option<u64>,
    /// Quota of each writable directory: bytes and inodes.
    pub writable_max_bytes: u64,
    pub writable_max_files: u64,
    pub cwd: PathBuf,
}

/// One host path made visible inside the jail at the same path (or, `empty`, a writable
/// directory of the run's own there).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub path: PathBuf,
    pub writable: bool,
    /// Skipped when missing on the host.
    pub optional: bool,
    /// An empty writable directory made for the run (under the writable quota), no host path:
    /// a Wasm run's fresh `/app`, a service run's work directory.
    pub empty: bool,
    /// The key or flag that asked for it, for messages: `filesystem.read-only[2]`, `--rw`.
    pub origin: String,
}

/// One problem found in a policy: the key path, where it is in the file, and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub key: String,
    pub message: String,
}

/// Checks a parsed policy file; returns every problem found, not just the first. One function
/// per section, each checking its keys and giving back its part of the policy.
pub fn validate(file: PolicyFile, origin: &str) -> Result<Policy, Vec<Problem>> {
    let mut problems = Vec::new();
    let mut bad = |key: &str, message: String| problems.push(Problem { key: key.to_string(), message });
    if file.version != 1 {
        bad("version", format!("unsupported version {} (this stockade reads version 1)", file.version));
    }
    let namespaces = file.namespaces;
    let identity = identity(&file.identity, &mut bad);
    let filesystem = filesystem(&file.filesystem, &namespaces, &mut bad);
    let wall_timeout = limits(&file, &mut bad);
    environment(&file, &mut bad);
    let (landlock, seccomp) = landlock_and_seccomp(&file, &mut bad);
    let cgroups = cgroups(&file.cgroups, &mut bad);
    let wasm = wasm(&file.wasm, &mut bad);
    let network = network(&file, &mut bad);
    if let Err(message) = check_hostname(&file.process.hostname) {
        bad("process.hostname", message);
    }
    let exec_allow = exec_allow(&file, &mut bad);
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(Policy {
        origin: origin.to_string(),
        namespaces,
        identity,
        filesystem,
        wall_timeout,
        rlimits: file.rlimits.0,
        stdout_max_bytes: value(file.output.stdout_max_bytes),
        stderr_max_bytes: value(file.output.stderr_max_bytes),
        over_cap: file.output.over_cap,
        env_pass: file.environment.pass,
        env_set: file.environment.set.0,
        hostname: file.process.hostname,
        stdin: file.process.stdin,
        exec_allow,
        landlock,
        seccomp,
        cgroups,
        wasm,
        network,
    })
}

/// The most files `process.exec-allow` may list.
pub const MAX_EXEC_ALLOW: usize = 32;

/// `process.exec-allow`: absolute plain paths, no repeats, at most [`MAX_EXEC_ALLOW`], not beside
/// `seccomp.allow = ["exec"]`. That each exists is checked as a jail is prepared (`layers/exec.rs`).
fn exec_allow(file: &PolicyFile, bad: &mut Bad<'_>) -> Vec<PathBuf> {
    let list = &file.process.exec_allow;
    if list.len() > MAX_EXEC_ALLOW {
        bad("process.exec-allow", format!("lists {} files; at most {MAX_EXEC_ALLOW}", list.len()));
    }
    if !list.is_empty() && file.seccomp.allow.contains(&SyscallGroup::Exec) {
        bad(
            "process.exec-allow",
            "seccomp.allow = [\"exec\"] already lets the program exec anything: remove one".into(),
        );
    }
    let mut out: Vec<PathBuf> = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        let p = Path::new(entry);
        let plain = p.components().all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        if !p.is_absolute() || !plain || entry.ends_with('/') {
            bad(&format!("process.exec-allow[{i}]"), format!("{entry:?}: give a file's absolute path (no . or ..)"));
        } else if out.iter().any(|o| o == p) {
            bad(&format!("process.exec-allow[{i}]"), format!("{entry:?} is listed twice"));
        } else {
            out.push(p.to_path_buf());
        }
    }
    out
}

fn network(file: &PolicyFile, bad: &mut Bad<'_>) -> NetworkPolicy {
    let NetworkFile { egress_allow, egress_max_connections, egress_max_bytes } = &file.network;
    if egress_allow.len() > MAX_EGRESS_RULES {
        bad("network.egress-allow", format!("lists {} hosts; at most {MAX_EGRESS_RULES}", egress_allow.len()));
    }
    let mut rules: Vec<EgressRule> = Vec::with_capacity(egress_allow.len());
    for (i, entry) in egress_allow.iter().enumerate() {
        match entry.parse::<EgressRule>() {
            Ok(r) if rules.contains(&r) => bad(&format!("network.egress-allow[{i}]"), format!("{r} is listed twice")),
            Ok(r) => rules.push(r),
            Err(e) => bad(&format!("network.egress-allow[{i}]"), format!("{entry:?}: {e}")),
        }
    }
    if !(1..=MAX_EGRESS_CONNECTIONS).contains(egress_max_connections) {
        bad("network.egress-max-connections", format!("must be between 1 and {MAX_EGRESS_CONNECTIONS}"));
    }
    if *egress_max_bytes == 0 {
        bad("network.egress-max-bytes", "must be at least 1".into());
    }
    if !rules.is_empty() {
        for (key, message) in egress_conflicts(&file.namespaces, &file.seccomp.allow) {
            bad(&key, message);
        }
    }
    NetworkPolicy {
        egress_allow: rules,
        egress_max_connections: *egress_max_connections,
        egress_max_bytes: *egress_max_bytes,
    }
}

/// What a policy with an egress list cannot also have: the proxy lives in the jail's own network
/// namespace, and the filter is what keeps every socket but a TCP one to it. Each problem with
/// the key it is at (the file's and `Policy::add_egress`'s one rule).
pub(super) fn egress_conflicts(namespaces: &Namespaces, allow: &[SyscallGroup]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if !namespaces.net {
        out.push((
            "network.egress-allow".to_string(),
            "needs namespaces.net = true: the proxy listens inside the jail's own network namespace, and without \
             one the program has the host's network"
                .to_string(),
        ));
    }
    for (group, why) in [
        (SyscallGroup::Network, "every socket is allowed already: the list would hold nothing back"),
        (SyscallGroup::IoUring, "io_uring opens sockets past the filter that keeps them to TCP"),
    ] {
        if let Some(i) = allow.iter().position(|g| *g == group) {
            out.push((
                format!("seccomp.allow[{i}]"),
                format!("{:?} cannot be allowed with network.egress-allow: {why}", group.name()),
            ));
        }
    }
    out
}

/// A limit's value; `None` for `"unlimited"`.
fn value(l: Limit) -> Option<u64> {
    match l {
        Limit::Value(v) => Some(v),
        Limit::Unlimited => None,
    }
}

/// Where a section reports its problems: (key, message).
type Bad<'a> = dyn FnMut(&str, String) + 'a;

fn identity(id: &IdentityFile, bad: &mut Bad<'_>) -> Identity {
    for (key, value) in [("identity.host-uid", id.host_uid), ("identity.host-gid", id.host_gid)] {
        if value == 0 {
            bad(key, "must not be 0: the jail never runs as host root".into());
        }
    }
    for (key, value) in [
        ("identity.uid", id.uid),
        ("identity.gid", id.gid),
        ("identity.host-uid", id.host_uid),
        ("identity.host-gid", id.host_gid),
    ] {
        if value == u32::MAX {
            bad(key, "4294967295 is not a valid id".into());
        }
    }
    let owners = (id.owner_uid_count > 0).then_some((id.owner_uid_first, id.owner_uid_count));
    if let Some((first, count)) = owners {
        let last = u64::from(first) + u64::from(count) - 1;
        if first == 0 {
            bad("identity.owner-uid-first", "must not be 0: the point is a uid that is not root's".into());
        } else if last >= u64::from(u32::MAX) {
            bad("identity.owner-uid-count", format!("the range ends at {last}, past the last valid uid 4294967294"));
        } else if (u64::from(first)..=last).contains(&u64::from(id.host_uid)) {
            bad(
                "identity.owner-uid-first",
                format!("the owner uids include identity.host-uid {}: they must be uids no one uses", id.host_uid),
            );
        }
        if count > 1 << 20 {
            bad("identity.owner-uid-count", "must be at most 1048576".into());
        }
    }

    Identity { uid: id.uid, gid: id.gid, host_uid: id.host_uid, host_gid: id.host_gid, owner_uids: owners }
}

fn filesystem(fs: &FilesystemFile, namespaces: &Namespaces, bad: &mut Bad<'_>) -> Filesystem {
    let mut grants = Vec::new();
    for (key, list, writable, optional) in [
        ("filesystem.read-only", &fs.read_only, false, false),
        ("filesystem.read-only-if-present", &fs.read_only_if_present, false, true),
        ("filesystem.read-write", &fs.read_write, true, false),
    ] {
        for (i, p) in list.iter().enumerate() {
            let key = format!("{key}[{i}]");
            match check_grant_path(p) {
                Ok(path) => grants.push(Grant { path, writable, optional, empty: false, origin: key }),
                Err(message) => bad(&key, message),
            }
        }
    }
    // The same path both read-only and read-write: one of them is a mistake. (A read-write path
    // inside a read-only one is fine: the inner grant wins there.)
    for g in grants.iter().filter(|g| g.writable) {
        if let Some(ro) = grants.iter().find(|r| !r.writable && r.path == g.path) {
            bad(&g.origin, format!("{} is also granted read-only ({}): list it once", g.path.display(), ro.origin));
        }
    }
    if let Err(message) = check_inside_path(&fs.cwd) {
        bad("filesystem.cwd", message);
    }
    if fs.shm_size_bytes > 0 && !fs.dev {
        bad(
            "filesystem.shm-size-bytes",
            "needs filesystem.dev = true (/dev/shm lives in the jail's /dev); set 0".into(),
        );
    }
    // A tmpfs smaller than a page, or with fewer inodes than its root needs, cannot be mounted.
    if fs.writable_max_bytes < 4096 {
        bad("filesystem.writable-max-bytes", "must be >= 4096 (one page)".into());
    }
    if fs.writable_max_files < 2 {
        bad("filesystem.writable-max-files", "must be >= 2 (the directory itself counts)".into());
    }
    if namespaces.mount && fs.proc != ProcMode::None && !namespaces.pid {
        bad(
            "filesystem.proc",
            "needs namespaces.pid = true (a procfs of the host's pid namespace would show host processes); \
             set proc = \"none\""
                .into(),
        );
    }

    Filesystem {
        grants,
        writable_exec: fs.writable_exec,
        proc: fs.proc,
        dev: fs.dev,
        tmp_size_bytes: (fs.tmp_size_bytes > 0).then_some(fs.tmp_size_bytes),
        shm_size_bytes: (fs.shm_size_bytes > 0).then_some(fs.shm_size_bytes),
        writable_max_bytes: fs.writable_max_bytes,
        writable_max_files: fs.writable_max_files,
        cwd: PathBuf::from(&fs.cwd),
    }
}

/// The wall-clock limit and the rlimits.
fn limits(file: &PolicyFile, bad: &mut Bad<'_>) -> Duration {
    let timeout_ms = file.limits.wall_timeout_ms;
    if let Err(message) = check_wall_timeout_ms(timeout_ms) {
        bad("limits.wall-timeout-ms", message);
    }

    for (k, v) in &file.rlimits.0 {
        let key = format!("rlimits.{}", k.key());
        if let Err(message) = check_rlimit(*k, *v) {
            bad(&key, message);
        }
    }

    Duration::from_millis(timeout_ms)
}

fn environment(file: &PolicyFile, bad: &mut Bad<'_>) {
    for (i, name) in file.environment.pass.iter().enumerate() {
        if let Err(message) = check_env_name(name) {
            bad(&format!("environment.pass[{i}]"), message);
        }
    }
    for (name, value) in &file.environment.set.0 {
        let key = format!("environment.set.{name}");
        if let Err(message) = check_env_name(name) {
            bad(&key, message);
        } else if value.contains('\0') {
            bad(&key, "must not contain a NUL byte".into());
        }
    }
}

fn landlock_and_seccomp(file: &PolicyFile, bad: &mut Bad<'_>) -> (LandlockPolicy, SeccompPolicy) {
    if !(1..=6).contains(&file.landlock.min_abi) {
        bad("landlock.min-abi", "must be between 1 and 6".into());
    }
    let sc = &file.seccomp;
    for (key, list) in [("seccomp.allow", &sc.allow), ("seccomp.kill", &sc.kill)] {
        for (i, g) in list.iter().enumerate() {
            if list[..i].contains(g) {
                bad(&format!("{key}[{i}]"), format!("{:?} is listed twice", g.name()));
            }
        }
    }
    for (i, g) in sc.kill.iter().enumerate() {
        if sc.allow.contains(g) {
            bad(&format!("seccomp.kill[{i}]"), format!("{:?} is also in seccomp.allow", g.name()));
        }
    }
    if let Some(i) = sc.allow.iter().position(|g| *g == SyscallGroup::Network)
        && !sc.allow.contains(&SyscallGroup::UnixConnect)
    {
        bad(
            &format!("seccomp.allow[{i}]"),
            "\"network\" needs \"unix-connect\" in seccomp.allow too: a filter cannot tell a TCP socket's connect \
             from a unix socket's"
                .into(),
        );
    }
    (
        LandlockPolicy { required: file.landlock.required, min_abi: file.landlock.min_abi },
        SeccompPolicy { required: sc.required, allow: sc.allow.clone(), kill: sc.kill.clone() },
    )
}

/// The least memory a jail is built with (`cgroups.memory-max-bytes`, and a request's limit).
pub const MEMORY_MAX_FLOOR: u64 = 1 << 20;
/// The fewest processes a jail runs with: its init and the program (`cgroups.pids-max`).
pub const PIDS_MAX_FLOOR: u64 = 2;
/// One Wasm page (`wasm.memory-max-bytes`).
pub const WASM_MEMORY_FLOOR: u64 = 65536;

fn cgroups(cg: &CgroupsFile, bad: &mut Bad<'_>) -> CgroupPolicy {
    if !(1000..=1_000_000).contains(&cg.cpu_period_us) {
        bad("cgroups.cpu-period-us", "must be between 1000 and 1000000".into());
    }
    if value(cg.memory_max_bytes).is_some_and(|m| m < MEMORY_MAX_FLOOR) {
        bad("cgroups.memory-max-bytes", "must be at least 1048576 (1 MiB), or \"unlimited\"".into());
    }
    if value(cg.pids_max).is_some_and(|n| n < PIDS_MAX_FLOOR) {
        bad("cgroups.pids-max", "must be at least 2 (the run's init and the program count), or \"unlimited\"".into());
    }
    if value(cg.cpu_max_percent) == Some(0) {
        bad("cgroups.cpu-max-percent", "must be > 0, or \"unlimited\"".into());
    }
    if !cg.parent.is_empty()
        && let Err(message) = check_inside_path(&cg.parent)
    {
        bad("cgroups.parent", message);
    }
    if !cg.parent.is_empty() && !cg.enabled {
        bad("cgroups.parent", "is set, but cgroups.enabled = false: no cgroup is made".into());
    }
    if !cg.enabled {
        for (key, l) in [
            ("cgroups.memory-max-bytes", cg.memory_max_bytes),
            ("cgroups.pids-max", cg.pids_max),
            ("cgroups.cpu-max-percent", cg.cpu_max_percent),
        ] {
            if value(l).is_some() {
                bad(key, "is a limit, but cgroups.enabled = false: set it to \"unlimited\" or enable cgroups".into());
            }
        }
    }
    let cpu_max_us =
        value(cg.cpu_max_percent).map(|pct| (pct.saturating_mul(cg.cpu_period_us) / 100, cg.cpu_period_us));

    CgroupPolicy {
        enabled: cg.enabled,
        best_effort: cg.best_effort,
        parent: (!cg.parent.is_empty()).then(|| cg.parent.clone()),
        memory_max_bytes: value(cg.memory_max_bytes),
        pids_max: value(cg.pids_max),
        cpu_max_us,
    }
}

fn wasm(wasm: &WasmFile, bad: &mut Bad<'_>) -> WasmPolicy {
    if wasm.memory_max_bytes < WASM_MEMORY_FLOOR {
        bad("wasm.memory-max-bytes", "must be at least 65536 (one Wasm page)".into());
    }
    if wasm.instances_max == 0 {
        bad("wasm.instances-max", "must be > 0".into());
    }
    if matches!(wasm.fuel, Limit::Value(0)) {
        bad("wasm.fuel", "must be > 0, or \"unlimited\"".into());
    }
    if wasm.module_max_bytes < 8 || wasm.module_max_bytes > 1 << 30 {
        bad("wasm.module-max-bytes", "must be between 8 (a module's header) and 1073741824".into());
    }

    let python_modules = wasm.python_modules.as_ref().map(|names| {
        let mut names = names.clone();
        names.sort();
        names.dedup();
        if let Some(bad_name) = names.iter().find(|n| !is_module_name(n)) {
            bad(
                "wasm.python-modules",
                format!("{bad_name:?} is not a module name (dotted Python identifiers, e.g. \"json\", \"xml.etree\")"),
            );
        }
        names
    });
    WasmPolicy {
        memory_max_bytes: wasm.memory_max_bytes,
        fuel: value(wasm.fuel),
        table_elements_max: wasm.table_elements_max,
        instances_max: wasm.instances_max,
        module_max_bytes: wasm.module_max_bytes,
        python_modules,
    }
}

/// A module's name: ASCII identifiers joined by dots, at most 200 bytes.
fn is_module_name(name: &str) -> bool {
    let ident = |p: &str| {
        let mut chars = p.chars();
        chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
    };
    name.len() <= 200 && name.split('.').all(ident)
}

/// A path inside the jail: absolute, no `.` or `..`, no NUL.
/// The wall-clock limit: more than zero, at most a week (milliseconds). The one check of it, for
/// the file's `limits.wall-timeout-ms`, `--timeout` and the library's setter alike.
pub fn check_wall_timeout_ms(ms: u64) -> Result<Duration, String> {
    if ms == 0 {
        Err("must be > 0".into())
    } else if ms > MAX_WALL_TIMEOUT_MS {
        Err(format!("must be <= {MAX_WALL_TIMEOUT_MS} (one week)"))
    } else {
        Ok(Duration::from_millis(ms))
    }
}

pub fn check_inside_path(p: &str) -> Result<(), String> {
    if p.contains('\0') {
        return Err("must not contain a NUL byte".into());
    }
    let path = Path::new(p);
    if !path.is_absolute() {
        return Err(format!("{p:?} must be an absolute path"));
    }
    if path.components().any(|c| matches!(c, Component::ParentDir | Component::CurDir)) {
        return Err(format!("{p:?} must not contain `.` or `..` components"));
    }
    Ok(())
}

/// A host path to grant: as for inside paths, plus not `/` and not in the kernel's pseudo
/// filesystems (the jail provides its own `/proc` and `/dev`; `/sys` is never shown).
pub fn check_grant_path(p: &str) -> Result<PathBuf, String> {
    check_inside_path(p)?;
    let path: PathBuf = Path::new(p).components().collect();
    if path == Path::new("/") {
        return Err("granting \"/\" would show the whole host; grant the directories the program needs".into());
    }
    for reserved in ["/proc", "/sys", "/dev"] {
        if path.starts_with(reserved) {
            return Err(format!(
                "{p:?} is inside {reserved}, which the jail provides itself (or not at all) and never binds from the host"
            ));
        }
    }
    Ok(path)
}

fn check_rlimit(key: RlimitKey, value: Limit) -> Result<(), String> {
    let Limit::Value(v) = value else { return Ok(()) };
    match key {
        RlimitKey::MaxOpenFiles if !(4..=1 << 20).contains(&v) => {
            Err("must be between 4 (stdin, stdout, stderr and one more) and 1048576".into())
        }
        RlimitKey::CpuSeconds if v == 0 => Err("must be > 0 (0 would kill the program at once)".into()),
        RlimitKey::MaxProcesses if v == 0 => Err("must be > 0 (the program itself counts)".into()),
        RlimitKey::NiceCeiling if v > 40 => Err("must be <= 40".into()),
        RlimitKey::RealtimePriority if v > 99 => Err("must be <= 99".into()),
        _ => Ok(()),
    }
}

fn check_env_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("must not be empty".into());
    }
    if name.contains('=') || name.contains('\0') {
        return Err(format!("{name:?} is not a valid variable name (no `=` or NUL)"));
    }
    Ok(())
}

fn check_hostname(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > 64 {
        return Err("must be 1 to 64 bytes long".into());
    }
    if !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.') {
        return Err(format!("{name:?} may hold only letters, digits, `-` and `.`"));
    }
    Ok(())
}
