//! `PolicyFile`: the policy exactly as written in TOML (serde types, nothing checked yet).
//!
//! Every key is documented once, here, beside its type; `policies/README.md` repeats the table for
//! readers of the files. Omitted keys take the strict default shown in `policies/default.toml`.

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize};
use std::borrow::Cow;
use std::fmt;

/// A policy file, version 1.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct PolicyFile {
    /// Policy format version. Only `1` exists.
    pub version: u32,
    #[serde(default)]
    pub namespaces: Namespaces,
    #[serde(default)]
    pub identity: IdentityFile,
    #[serde(default)]
    pub filesystem: FilesystemFile,
    #[serde(default)]
    pub limits: LimitsFile,
    /// Resource limits (setrlimit), applied in the order written.
    #[serde(default)]
    pub rlimits: RlimitsFile,
    #[serde(default)]
    pub output: OutputFile,
    #[serde(default)]
    pub environment: EnvironmentFile,
    #[serde(default)]
    pub process: ProcessFile,
    #[serde(default)]
    pub landlock: LandlockFile,
    #[serde(default)]
    pub seccomp: SeccompFile,
    #[serde(default)]
    pub cgroups: CgroupsFile,
    #[serde(default)]
    pub wasm: WasmFile,
    #[serde(default)]
    pub network: NetworkFile,
}

impl PolicyFile {
    /// Version 1 with every key at its default: the same policy as `policies/default.toml` (a
    /// unit test checks they agree), without parsing TOML.
    pub fn strict_default() -> PolicyFile {
        PolicyFile {
            version: 1,
            namespaces: Namespaces::default(),
            identity: IdentityFile::default(),
            filesystem: FilesystemFile::default(),
            limits: LimitsFile::default(),
            rlimits: RlimitsFile::default(),
            output: OutputFile::default(),
            environment: EnvironmentFile::default(),
            process: ProcessFile::default(),
            landlock: LandlockFile::default(),
            seccomp: SeccompFile::default(),
            cgroups: CgroupsFile::default(),
            wasm: WasmFile::default(),
            network: NetworkFile::default(),
        }
    }
}

/// `[namespaces]`: each namespace is created fresh for the run unless set to `false`. Every
/// combination is valid as written, so the validated policy holds this same type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct Namespaces {
    pub user: bool,
    pub pid: bool,
    pub mount: bool,
    pub net: bool,
    pub ipc: bool,
    pub uts: bool,
    pub cgroup: bool,
}

impl Default for Namespaces {
    fn default() -> Self {
        Namespaces { user: true, pid: true, mount: true, net: true, ipc: true, uts: true, cgroup: true }
    }
}

/// `[identity]`: who the program is, inside the jail and on the host.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct IdentityFile {
    /// uid the program sees inside the jail.
    pub uid: u32,
    /// gid the program sees inside the jail.
    pub gid: u32,
    /// Host uid the jail's uid maps to when stockade runs as root (a normal user maps to itself).
    pub host_uid: u32,
    /// Host gid the jail's gid maps to when stockade runs as root.
    pub host_gid: u32,
    /// First of the host uids that own the runs' user namespaces when stockade runs as root,
    /// one per concurrent run: the kernel charges a run's per-user counters (queued signals,
    /// inotify instances and watches, POSIX message queues, user namespaces) to that uid, not to
    /// root and not to another run. No file or process ever has it. (A normal user's runs are
    /// charged to that user.)
    pub owner_uid_first: u32,
    /// How many owner uids there are (the most runs at once); 0: root owns every run's user
    /// namespace, and the runs share root's counters.
    pub owner_uid_count: u32,
}

impl Default for IdentityFile {
    fn default() -> Self {
        IdentityFile {
            uid: 65534,
            gid: 65534,
            host_uid: 65534,
            host_gid: 65534,
            owner_uid_first: DEFAULT_OWNER_UID_FIRST,
            owner_uid_count: 65536,
        }
    }
}

/// 0x7f000000: above the ranges systemd documents for system, regular, dynamic and container
/// users (0-1879048191, plus its reserved 0x7ffe0000 foreign range), below 2^31.
pub const DEFAULT_OWNER_UID_FIRST: u32 = 0x7f00_0000;

/// `[filesystem]`: the jail's root is an empty read-only tmpfs holding only these.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct FilesystemFile {
    /// Host paths bound read-only (and executable) at the same path; each must exist.
    pub read_only: Vec<String>,
    /// Like `read-only`, but paths missing on this host are skipped.
    pub read_only_if_present: Vec<String>,
    /// Host paths bound writable at the same path; each must exist.
    pub read_write: Vec<String>,
    /// Whether files in writable places (`read-write` paths, `/tmp`) may be executed or mmapped
    /// executable.
    pub writable_exec: bool,
    /// `/proc` inside: `pid-only` (processes of the run only), `full`, or `none`.
    pub proc: ProcMode,
    /// Whether `/dev` holds null, zero, full, random and urandom (otherwise no `/dev`).
    pub dev: bool,
    /// Size of the private `/tmp` tmpfs in bytes; 0 means no `/tmp`.
    pub tmp_size_bytes: u64,
    /// Size of `/dev/shm` (POSIX shared memory and semaphores: Python's multiprocessing) in bytes,
    /// a tmpfs charged to the run's memory; 0 means none (needs `dev`).
    pub shm_size_bytes: u64,
    /// Quota of each writable directory (`read-write` paths, a Wasm `/app`), bytes: the program
    /// works on a tmpfs of this size holding a copy of the host directory, written back when
    /// the run ends; past it writes fail with ENOSPC and the run ends as `disk-limit`.
    pub writable_max_bytes: u64,
    /// Quota of each writable directory in files, directories and links (inodes).
    pub writable_max_files: u64,
    /// Working directory of the program, a path inside the jail.
    pub cwd: String,
}

impl Default for FilesystemFile {
    fn default() -> Self {
        FilesystemFile {
            read_only: vec!["/usr".into()],
            read_only_if_present: ["/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32", "/etc/ld.so.cache"]
                .map(String::from)
                .to_vec(),
            read_write: Vec::new(),
            writable_exec: false,
            proc: ProcMode::PidOnly,
            dev: true,
            tmp_size_bytes: 64 << 20,
            shm_size_bytes: 16 << 20,
            writable_max_bytes: 64 << 20,
            writable_max_files: 4096,
            cwd: "/tmp".into(),
        }
    }
}

/// What `/proc` shows inside the jail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ProcMode {
    /// A procfs of the run's pid namespace with only the per-process entries (`subset=pid`):
    /// no `/proc/sys`, `/proc/kallsyms`, `/proc/timer_list` and the like.
    PidOnly,
    /// A procfs of the run's pid namespace with every entry.
    Full,
    /// No `/proc`.
    None,
}

/// `[limits]`: limits the supervisor enforces.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct LimitsFile {
    /// Wall-clock limit in milliseconds; the whole run is killed when it passes.
    pub wall_timeout_ms: u64,
}

impl Default for LimitsFile {
    fn default() -> Self {
        LimitsFile { wall_timeout_ms: 10_000 }
    }
}

/// One resource limit value: a number or `"unlimited"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Value(u64),
    Unlimited,
}

impl JsonSchema for Limit {
    fn schema_name() -> Cow<'static, str> {
        "Limit".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "description": "A non-negative integer in the key's unit, or \"unlimited\".",
            "oneOf": [{ "type": "integer", "minimum": 0 }, { "const": "unlimited" }]
        })
    }
}

impl Serialize for Limit {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Limit::Value(v) => s.serialize_u64(*v),
            Limit::Unlimited => s.serialize_str("unlimited"),
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Limit;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a non-negative integer or \"unlimited\"")
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Limit, E> {
                Ok(Limit::Value(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Limit, E> {
                u64::try_from(v).map(Limit::Value).map_err(|_| E::invalid_value(de::Unexpected::Signed(v), &self))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Limit, E> {
                if v == "unlimited" {
                    Ok(Limit::Unlimited)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// The resource limits stockade knows, by their policy key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RlimitKey {
    /// RLIMIT_AS, bytes.
    AddressSpaceBytes,
    /// RLIMIT_CORE, bytes.
    CoreBytes,
    /// RLIMIT_CPU, seconds of CPU time (SIGXCPU at the soft limit, SIGKILL at the hard one).
    CpuSeconds,
    /// RLIMIT_DATA, bytes.
    DataBytes,
    /// RLIMIT_FSIZE, bytes (SIGXFSZ past it).
    FileSizeBytes,
    /// RLIMIT_MEMLOCK, bytes.
    LockedMemoryBytes,
    /// RLIMIT_MSGQUEUE, bytes.
    MessageQueueBytes,
    /// RLIMIT_NICE, the ceiling `20 - nice` may reach.
    NiceCeiling,
    /// RLIMIT_NOFILE, count; the highest fd number is one less.
    MaxOpenFiles,
    /// RLIMIT_NPROC, count of processes/threads of the run's uid (counted per user namespace).
    MaxProcesses,
    /// RLIMIT_RTPRIO, priority.
    RealtimePriority,
    /// RLIMIT_RTTIME, microseconds.
    RealtimeTimeoutUs,
    /// RLIMIT_SIGPENDING, count.
    MaxPendingSignals,
    /// RLIMIT_STACK, bytes.
    StackBytes,
}

/// Every rlimit key, for "expected one of" messages.
pub(crate) const RLIMIT_KEYS: &[&str] = &[
    "address-space-bytes",
    "core-bytes",
    "cpu-seconds",
    "data-bytes",
    "file-size-bytes",
    "locked-memory-bytes",
    "message-queue-bytes",
    "nice-ceiling",
    "max-open-files",
    "max-processes",
    "realtime-priority",
    "realtime-timeout-us",
    "max-pending-signals",
    "stack-bytes",
];

impl RlimitKey {
    pub const ALL: [RlimitKey; 14] = [
        RlimitKey::AddressSpaceBytes,
        RlimitKey::CoreBytes,
        RlimitKey::CpuSeconds,
        RlimitKey::DataBytes,
        RlimitKey::FileSizeBytes,
        RlimitKey::LockedMemoryBytes,
        RlimitKey::MessageQueueBytes,
        RlimitKey::NiceCeiling,
        RlimitKey::MaxOpenFiles,
        RlimitKey::MaxProcesses,
        RlimitKey::RealtimePriority,
        RlimitKey::RealtimeTimeoutUs,
        RlimitKey::MaxPendingSignals,
        RlimitKey::StackBytes,
    ];

    /// The policy key, as written in TOML.
    pub fn key(self) -> &'static str {
        match self {
            RlimitKey::AddressSpaceBytes => "address-space-bytes",
            RlimitKey::CoreBytes => "core-bytes",
            RlimitKey::CpuSeconds => "cpu-seconds",
            RlimitKey::DataBytes => "data-bytes",
            RlimitKey::FileSizeBytes => "file-size-bytes",
            RlimitKey::LockedMemoryBytes => "locked-memory-bytes",
            RlimitKey::MessageQueueBytes => "message-queue-bytes",
            RlimitKey::NiceCeiling => "nice-ceiling",
            RlimitKey::MaxOpenFiles => "max-open-files",
            RlimitKey::MaxProcesses => "max-processes",
            RlimitKey::RealtimePriority => "realtime-priority",
            RlimitKey::RealtimeTimeoutUs => "realtime-timeout-us",
            RlimitKey::MaxPendingSignals => "max-pending-signals",
            RlimitKey::StackBytes => "stack-bytes",
        }
    }
}

/// `[rlimits]`: an ordered list of (key, value), in the order the file wrote them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RlimitsFile(pub Vec<(RlimitKey, Limit)>);

impl Default for RlimitsFile {
    fn default() -> Self {
        RlimitsFile(vec![
            (RlimitKey::CoreBytes, Limit::Value(0)),
            (RlimitKey::MaxOpenFiles, Limit::Value(256)),
            (RlimitKey::FileSizeBytes, Limit::Value(64 << 20)),
            (RlimitKey::MaxProcesses, Limit::Value(64)),
            (RlimitKey::LockedMemoryBytes, Limit::Value(0)),
            (RlimitKey::MessageQueueBytes, Limit::Value(0)),
            (RlimitKey::MaxPendingSignals, Limit::Value(256)),
            (RlimitKey::NiceCeiling, Limit::Value(0)),
            (RlimitKey::RealtimePriority, Limit::Value(0)),
        ])
    }
}

impl JsonSchema for RlimitsFile {
    fn schema_name() -> Cow<'static, str> {
        "Rlimits".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        let limit = generator.subschema_for::<Limit>().to_value();
        let properties: serde_json::Map<String, serde_json::Value> =
            RLIMIT_KEYS.iter().map(|k| (k.to_string(), limit.clone())).collect();
        json_schema!({
            "description": "Resource limits, soft = hard, applied in the order written.",
            "type": "object",
            "properties": properties,
            "additionalProperties": false
        })
    }
}

impl Serialize for RlimitsFile {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for RlimitsFile {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RlimitsFile;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of resource limits")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<RlimitsFile, A::Error> {
                let mut out: Vec<(RlimitKey, Limit)> = Vec::new();
                // Keys are read as strings so error paths name them (`rlimits.stack-bytes`).
                while let Some(name) = map.next_key::<String>()? {
                    let Some(key) = RlimitKey::ALL.iter().copied().find(|k| k.key() == name) else {
                        return Err(de::Error::unknown_field(&name, RLIMIT_KEYS));
                    };
                    if out.iter().any(|(k, _)| *k == key) {
                        return Err(de::Error::custom(format_args!("duplicate key `{name}`")));
                    }
                    out.push((key, map.next_value()?));
                }
                Ok(RlimitsFile(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// `[output]`: caps on what the supervisor reads from the program.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct OutputFile {
    /// Bytes of stdout passed on; past them, see `over-cap` (the report says `truncated`).
    pub stdout_max_bytes: Limit,
    /// Bytes of stderr passed on, as for stdout.
    pub stderr_max_bytes: Limit,
    /// What a run that writes past a cap gets: `end` (it is killed at once and reported as
    /// `output-limit`; a flood costs nobody CPU) or `truncate` (the rest is read and dropped
    /// while the run goes on to its own end).
    pub over_cap: OverCap,
}

impl Default for OutputFile {
    fn default() -> Self {
        OutputFile {
            stdout_max_bytes: Limit::Value(1 << 20),
            stderr_max_bytes: Limit::Value(1 << 20),
            over_cap: OverCap::End,
        }
    }
}

/// What happens past an output cap (`output.over-cap`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum OverCap {
    /// The run is killed and reported as `output-limit`.
    End,
    /// The rest is read and dropped; the run goes on.
    Truncate,
}

/// `[environment]`: the program's environment is built from these only.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct EnvironmentFile {
    /// Names copied from the caller's environment when set there.
    pub pass: Vec<String>,
    /// Variables set to fixed values (applied after `pass`, so they win).
    pub set: OrderedStrings,
}

impl Default for EnvironmentFile {
    fn default() -> Self {
        EnvironmentFile {
            pass: Vec::new(),
            set: OrderedStrings(vec![
                ("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()),
                ("HOME".into(), "/tmp".into()),
                ("LANG".into(), "C.UTF-8".into()),
            ]),
        }
    }
}

/// A TOML table of strings kept in the order written.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OrderedStrings(pub Vec<(String, String)>);

impl JsonSchema for OrderedStrings {
    fn schema_name() -> Cow<'static, str> {
        "StringTable".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({ "type": "object", "additionalProperties": { "type": "string" } })
    }
}

impl Serialize for OrderedStrings {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for OrderedStrings {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = OrderedStrings;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of strings")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<OrderedStrings, A::Error> {
                let mut out = Vec::new();
                while let Some((k, v)) = map.next_entry::<String, String>()? {
                    out.push((k, v));
                }
                Ok(OrderedStrings(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// `[process]`: the program's process environment.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct ProcessFile {
    /// Hostname inside the jail (needs the uts namespace).
    pub hostname: String,
    /// The program's stdin: `null` (`/dev/null`) or `inherit` (the caller's stdin).
    pub stdin: StdinMode,
    /// Files the program may exec after it starts (absolute paths, at most 32; each must exist):
    /// whatever path, link or fd names one, the file is its device and inode. Every other exec
    /// is refused, as with none. Needs Landlock and the seccomp filter; not with
    /// `seccomp.allow = ["exec"]`.
    pub exec_allow: Vec<String>,
}

impl Default for ProcessFile {
    fn default() -> Self {
        ProcessFile { hostname: "stockade".into(), stdin: StdinMode::Null, exec_allow: Vec::new() }
    }
}

/// Where the program's stdin comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum StdinMode {
    Null,
    Inherit,
}

/// `[landlock]`: the kernel's path-based access control, mirroring the visible tree.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct LandlockFile {
    /// Refuse to run when the kernel's Landlock ABI is below `min-abi`.
    pub required: bool,
    /// The Landlock ABI this policy needs (1-6); newer features are applied when present.
    pub min_abi: u32,
}

impl Default for LandlockFile {
    fn default() -> Self {
        LandlockFile { required: true, min_abi: 1 }
    }
}

/// `[network]`: what the jail may reach. Nothing by default: its network namespace has no
/// interface up and every socket but a unix one is refused.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct NetworkFile {
    /// Hosts the program may reach through the supervisor's proxy, each `HOST:PORT`: a name
    /// (`pypi.org:443`), `*.domain` (any name below the domain, not the domain itself) or an IP
    /// address (`127.0.0.1:8080`, `[::1]:80`). A name never matches an address, and a name that
    /// resolves into loopback, private or link-local ranges is refused unless that address is
    /// listed too. The program gets `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` (HTTP CONNECT,
    /// and absolute-form HTTP); its filter allows TCP sockets and `connect`, no bind, listen,
    /// UDP or raw socket. Empty (the default): no network.
    pub egress_allow: Vec<String>,
    /// The most connections the proxy opens for a run; one past it is refused.
    pub egress_max_connections: u32,
    /// The most bytes through the proxy in a run, both ways together; the connection that
    /// passes it is cut.
    pub egress_max_bytes: u64,
}

impl Default for NetworkFile {
    fn default() -> Self {
        NetworkFile { egress_allow: Vec::new(), egress_max_connections: 64, egress_max_bytes: 1 << 30 }
    }
}

/// `[seccomp]`: system calls denied to the program, by group.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct SeccompFile {
    /// Refuse to run on a kernel without seccomp filters (instead of running without them).
    pub required: bool,
    /// Groups allowed after all (every group is denied by default).
    pub allow: Vec<SyscallGroup>,
    /// Groups whose violation kills the whole run (status `seccomp-violation`) instead of
    /// failing the call with EPERM.
    pub kill: Vec<SyscallGroup>,
}

impl Default for SeccompFile {
    fn default() -> Self {
        SeccompFile { required: true, allow: Vec::new(), kill: Vec::new() }
    }
}

/// A named group of system calls the seccomp layer denies unless allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum SyscallGroup {
    /// `socket`/`socketpair` for any family but AF_UNIX.
    Network,
    /// Any exec after the one that starts the program.
    Exec,
    /// io_uring_setup/enter/register (io_uring can open sockets past a socket filter).
    IoUring,
    Bpf,
    /// perf_event_open.
    Perf,
    /// keyctl, add_key, request_key.
    Keyring,
    Userfaultfd,
    /// unshare, setns, clone with namespace flags, clone3 (ENOSYS, so libc falls back to clone).
    Namespaces,
    /// mount, umount2, pivot_root and the new mount API.
    Mount,
    Chroot,
    Ptrace,
    /// process_vm_readv/writev.
    ProcessVm,
    Kcmp,
    /// name_to_handle_at, open_by_handle_at.
    FileHandles,
    /// Module loading, kexec, reboot.
    Kernel,
    /// Clock and time setters.
    Clock,
    Syslog,
    /// mknod, mknodat.
    Mknod,
    /// sethostname, setdomainname.
    Hostname,
    /// personality() with anything but the default persona or the query.
    Personality,
    /// The TIOCSTI and TIOCLINUX ioctls (typing into a terminal).
    TtyInject,
    /// acct, swapon/off, quotactl, iopl/ioperm, vhangup, uselib.
    Admin,
    /// `connect` on any socket, and unix datagram sockets (whose `sendto`/`sendmsg` name any
    /// socket file): the way to a host daemon's socket (the system bus, a database) found in a
    /// granted directory. Socket pairs and pipes work without it.
    UnixConnect,
    /// modify_ldt (x86 segment tables: Wine, DOS emulators) and memfd_secret (memory taken out
    /// of the kernel's direct map).
    ExoticMemory,
    /// `sysinfo`: the host's counters (its memory, its process count, its load, its uptime),
    /// which change with what the host and other runs do: a channel between runs. Not allowed
    /// (the default), the supervisor answers it with the run's own figures: its memory limit
    /// and use, its processes, the time since it started.
    HostCounters,
}

impl SyscallGroup {
    pub const ALL: [SyscallGroup; 25] = [
        SyscallGroup::Network,
        SyscallGroup::Exec,
        SyscallGroup::IoUring,
        SyscallGroup::Bpf,
        SyscallGroup::Perf,
        SyscallGroup::Keyring,
        SyscallGroup::Userfaultfd,
        SyscallGroup::Namespaces,
        SyscallGroup::Mount,
        SyscallGroup::Chroot,
        SyscallGroup::Ptrace,
        SyscallGroup::ProcessVm,
        SyscallGroup::Kcmp,
        SyscallGroup::FileHandles,
        SyscallGroup::Kernel,
        SyscallGroup::Clock,
        SyscallGroup::Syslog,
        SyscallGroup::Mknod,
        SyscallGroup::Hostname,
        SyscallGroup::Personality,
        SyscallGroup::TtyInject,
        SyscallGroup::Admin,
        SyscallGroup::UnixConnect,
        SyscallGroup::ExoticMemory,
        SyscallGroup::HostCounters,
    ];

    /// The group's policy name.
    pub fn name(self) -> &'static str {
        match self {
            SyscallGroup::Network => "network",
            SyscallGroup::Exec => "exec",
            SyscallGroup::IoUring => "io-uring",
            SyscallGroup::Bpf => "bpf",
            SyscallGroup::Perf => "perf",
            SyscallGroup::Keyring => "keyring",
            SyscallGroup::Userfaultfd => "userfaultfd",
            SyscallGroup::Namespaces => "namespaces",
            SyscallGroup::Mount => "mount",
            SyscallGroup::Chroot => "chroot",
            SyscallGroup::Ptrace => "ptrace",
            SyscallGroup::ProcessVm => "process-vm",
            SyscallGroup::Kcmp => "kcmp",
            SyscallGroup::FileHandles => "file-handles",
            SyscallGroup::Kernel => "kernel",
            SyscallGroup::Clock => "clock",
            SyscallGroup::Syslog => "syslog",
            SyscallGroup::Mknod => "mknod",
            SyscallGroup::Hostname => "hostname",
            SyscallGroup::Personality => "personality",
            SyscallGroup::TtyInject => "tty-inject",
            SyscallGroup::Admin => "admin",
            SyscallGroup::UnixConnect => "unix-connect",
            SyscallGroup::ExoticMemory => "exotic-memory",
            SyscallGroup::HostCounters => "host-counters",
        }
    }
}

/// `[cgroups]`: one cgroup per run, with memory, process and CPU limits.
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct CgroupsFile {
    /// Put each run in a cgroup of its own (needed for any limit below).
    pub enabled: bool,
    /// Run anyway when a limit's controller is missing or not delegated (the report says which
    /// limits were not enforced), instead of refusing.
    pub best_effort: bool,
    /// The cgroup (a path as in /proc/self/cgroup, e.g. `/stockade.slice`) under which each
    /// run's cgroup is made; empty: the caller's own cgroup.
    pub parent: String,
    /// Memory limit of the whole run (all processes, page cache and /tmp included), bytes.
    /// No swap is allowed on top.
    pub memory_max_bytes: Limit,
    /// Most processes and threads alive at once in the run.
    pub pids_max: Limit,
    /// CPU time per period as a percentage of one CPU (150 = one and a half CPUs).
    pub cpu_max_percent: Limit,
    /// The CPU period, microseconds.
    pub cpu_period_us: u64,
}

impl Default for CgroupsFile {
    fn default() -> Self {
        CgroupsFile {
            enabled: true,
            best_effort: false,
            parent: String::new(),
            memory_max_bytes: Limit::Value(512 << 20),
            pids_max: Limit::Value(64),
            cpu_max_percent: Limit::Value(100),
            cpu_period_us: 100_000,
        }
    }
}

/// `[wasm]`: limits of the embedded Wasm runtime (`stockade run --python/--js/--wasm`).
#[derive(Debug, Clone, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case", default)]
pub struct WasmFile {
    /// Largest linear memory the guest may grow to, bytes (growth past it fails in the guest:
    /// status `wasm-memory-limit`).
    pub memory_max_bytes: u64,
    /// Fuel units the guest may burn (about one per Wasm instruction); `"unlimited"`: no fuel
    /// metering (faster), the wall-clock limit alone bounds the run.
    pub fuel: Limit,
    /// Most elements any table may grow to.
    pub table_elements_max: u64,
    /// Most module instances (and memories) per run of a module. The Python guest is a component
    /// of a fixed 14 core instances, built by stockade, that its code cannot add to: this does
    /// not apply to it.
    pub instances_max: u32,
    /// Largest module `--wasm` (or a service request) may bring, bytes. A module is compiled
    /// inside the jail the first time it runs, under the run's limits, and cached by the
    /// SHA-256 of the bytes compiled.
    pub module_max_bytes: u64,
    /// The standard-library modules Python code (`--python`, the `python` runtime) may import,
    /// by name (`json`, `xml.etree`): only these are in its view at all. Absent: the whole
    /// library. The modules the interpreter's snapshot has loaded and CPython's built-in C
    /// modules are part of the interpreter and always there. Python run by a host program
    /// (`python3` under `wrap-python`) cannot be held to it: a policy that sets it is refused
    /// for a program on the host.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python_modules: Option<Vec<String>>,
}

impl Default for WasmFile {
    fn default() -> Self {
        WasmFile {
            memory_max_bytes: 256 << 20,
            fuel: Limit::Unlimited,
            table_elements_max: 1 << 20,
            instances_max: 4,
            module_max_bytes: 32 << 20,
            python_modules: None,
        }
    }
}
