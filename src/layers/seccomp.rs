//! Seccomp: the system calls the program may not make, compiled to BPF in the parent.
//!
//! Filters are built with `seccompiler` (one match action per filter) and stacked; the kernel
//! applies the strictest answer:
//! 1. **errno**: the denied groups whose violation fails the call with `EPERM` (the default);
//! 2. **enosys**: `clone3`, so libc falls back to `clone`, whose flags a filter can see;
//! 3. **notify**: the groups whose violation kills the run, and on kernels before 6.11 the exec
//!    gate. The supervisor holds the listener: it learns the syscall, kills the run, and reports
//!    `seccomp-violation` with the name.
//!
//! Every filter starts with an architecture check that kills any call not made through the
//! native x86-64 entry point: i386 (`int 0x80`) by the audit arch, and x32 by the syscall number
//! (bit 30), which an `AUDIT_ARCH_X86_64` check alone lets through.
//!
//! **Exec after the first.** Every `execve`/`execveat` goes to the supervisor through the notify
//! filter. The first one is the child's own `execveat` of the prepared fd, made before any of
//! the program's code exists, so the supervisor lets exactly that one through and refuses (or,
//! with `exec` in `seccomp.kill`, kills the run on) every later one — whatever fd, path or
//! memfd it names. A filter alone cannot do this: `execveat` with an absolute path ignores its
//! fd argument, and a pointer argument cannot be pinned against a program that maps memory.

use crate::layers::LayerReport;
use crate::policy::{Policy, SyscallGroup};
use crate::sys::{self, Errno, SockFilter};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition as Cond, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;

/// Placeholder errno value marking the notify filter's returns, rewritten to
/// `SECCOMP_RET_USER_NOTIF` after compilation (seccompiler has no such action).
const NOTIFY_SENTINEL: u32 = 0xBEEF;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

const NS_FLAGS: [i32; 8] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWCGROUP,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    0x80, // CLONE_NEWTIME
];

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error("seccomp: cannot compile the {which} filter: {reason}")]
    Compile { which: &'static str, reason: String },
    #[error(
        "seccomp: this kernel has no seccomp filter support (CONFIG_SECCOMP_FILTER); run on a kernel with it, or \
         set seccomp.required = false"
    )]
    Unavailable,
}

/// One denied system call, with the conditions under which it is denied (none: always).
struct Deny {
    name: &'static str,
    nr: i64,
    rules: Vec<Vec<Cond>>,
}

fn always(name: &'static str, nr: i64) -> Deny {
    Deny { name, nr, rules: Vec::new() }
}

fn cond(arg: u8, len: Len, op: Op, value: u64) -> Cond {
    // Only fails for an argument index above 5; every index here is a literal 0-4.
    Cond::new(arg, len, op, value).unwrap_or_else(|_| unreachable!("argument index {arg} is valid"))
}

/// The system calls of a group, as denied.
fn group_calls(g: SyscallGroup) -> Vec<Deny> {
    use SyscallGroup as G;
    match g {
        G::Network => ["socket", "socketpair"]
            .iter()
            .zip([libc::SYS_socket, libc::SYS_socketpair])
            .map(|(name, nr)| Deny { name, nr, rules: vec![vec![cond(0, Len::Dword, Op::Ne, libc::AF_UNIX as u64)]] })
            .collect(),
        G::Exec => vec![always("execve", libc::SYS_execve), always("execveat", libc::SYS_execveat)],
        G::IoUring => vec![
            always("io_uring_setup", libc::SYS_io_uring_setup),
            always("io_uring_enter", libc::SYS_io_uring_enter),
            always("io_uring_register", libc::SYS_io_uring_register),
        ],
        G::Bpf => vec![always("bpf", libc::SYS_bpf)],
        G::Perf => vec![always("perf_event_open", libc::SYS_perf_event_open)],
        G::Keyring => vec![
            always("keyctl", libc::SYS_keyctl),
            always("add_key", libc::SYS_add_key),
            always("request_key", libc::SYS_request_key),
        ],
        G::Userfaultfd => vec![always("userfaultfd", libc::SYS_userfaultfd)],
        G::Namespaces => vec![
            always("unshare", libc::SYS_unshare),
            always("setns", libc::SYS_setns),
            Deny {
                name: "clone",
                nr: libc::SYS_clone,
                rules: NS_FLAGS.iter().map(|f| vec![cond(0, Len::Qword, Op::MaskedEq(*f as u64), *f as u64)]).collect(),
            },
        ],
        G::Mount => vec![
            always("mount", libc::SYS_mount),
            always("umount2", libc::SYS_umount2),
            always("pivot_root", libc::SYS_pivot_root),
            always("fsopen", libc::SYS_fsopen),
            always("fsconfig", libc::SYS_fsconfig),
            always("fsmount", libc::SYS_fsmount),
            always("fspick", libc::SYS_fspick),
            always("open_tree", libc::SYS_open_tree),
            always("move_mount", libc::SYS_move_mount),
            always("mount_setattr", libc::SYS_mount_setattr),
        ],
        G::Chroot => vec![always("chroot", libc::SYS_chroot)],
        G::Ptrace => vec![always("ptrace", libc::SYS_ptrace)],
        G::ProcessVm => vec![
            always("process_vm_readv", libc::SYS_process_vm_readv),
            always("process_vm_writev", libc::SYS_process_vm_writev),
        ],
        G::Kcmp => vec![always("kcmp", libc::SYS_kcmp)],
        G::FileHandles => vec![
            always("name_to_handle_at", libc::SYS_name_to_handle_at),
            always("open_by_handle_at", libc::SYS_open_by_handle_at),
        ],
        G::Kernel => vec![
            always("init_module", libc::SYS_init_module),
            always("finit_module", libc::SYS_finit_module),
            always("delete_module", libc::SYS_delete_module),
            always("kexec_load", libc::SYS_kexec_load),
            always("kexec_file_load", libc::SYS_kexec_file_load),
            always("reboot", libc::SYS_reboot),
        ],
        G::Clock => vec![
            always("settimeofday", libc::SYS_settimeofday),
            always("clock_settime", libc::SYS_clock_settime),
            always("clock_adjtime", libc::SYS_clock_adjtime),
            always("adjtimex", libc::SYS_adjtimex),
        ],
        G::Syslog => vec![always("syslog", libc::SYS_syslog)],
        G::Mknod => vec![always("mknod", libc::SYS_mknod), always("mknodat", libc::SYS_mknodat)],
        G::Hostname => {
            vec![always("sethostname", libc::SYS_sethostname), always("setdomainname", libc::SYS_setdomainname)]
        }
        G::Personality => vec![Deny {
            name: "personality",
            nr: libc::SYS_personality,
            // PER_LINUX (0) and the query (0xffffffff) stay allowed.
            rules: vec![vec![cond(0, Len::Dword, Op::Ne, 0), cond(0, Len::Dword, Op::Ne, 0xffff_ffff)]],
        }],
        G::TtyInject => vec![Deny {
            name: "ioctl",
            nr: libc::SYS_ioctl,
            rules: vec![
                vec![cond(1, Len::Dword, Op::Eq, libc::TIOCSTI)],
                vec![cond(1, Len::Dword, Op::Eq, libc::TIOCLINUX)],
            ],
        }],
        G::Admin => vec![
            always("acct", libc::SYS_acct),
            always("swapon", libc::SYS_swapon),
            always("swapoff", libc::SYS_swapoff),
            always("quotactl", libc::SYS_quotactl),
            always("iopl", libc::SYS_iopl),
            always("ioperm", libc::SYS_ioperm),
            always("vhangup", libc::SYS_vhangup),
            always("uselib", libc::SYS_uselib),
        ],
    }
}

/// The syscall name for a number, among the ones stockade filters (for reports).
pub fn syscall_name(nr: i32) -> Option<(&'static str, SyscallGroup)> {
    if i64::from(nr) == libc::SYS_clone3 {
        return Some(("clone3", SyscallGroup::Namespaces));
    }
    SyscallGroup::ALL
        .iter()
        .flat_map(|g| group_calls(*g).into_iter().map(move |d| (d.name, d.nr, *g)))
        .find(|(_, n, _)| *n == i64::from(nr))
        .map(|(name, _, g)| (name, g))
}

/// How exec is held to the one that starts the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecGuard {
    /// The exec group is allowed by the policy.
    None,
    /// Every exec goes to the supervisor, which lets only the first one through.
    Supervised,
}

/// Compiled filters and what they mean.
#[derive(Debug, Clone)]
pub struct SeccompPlan {
    /// Filters in installation order; the one with `true` is installed with a listener.
    pub filters: Vec<(Vec<SockFilter>, bool)>,
    pub exec: ExecGuard,
    denied: Vec<SyscallGroup>,
    killed: Vec<SyscallGroup>,
    allowed: Vec<SyscallGroup>,
    enabled: bool,
}

fn compile(
    which: &'static str,
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    action: SeccompAction,
) -> Result<BpfProgram, SeccompError> {
    let err = |e: seccompiler::BackendError| SeccompError::Compile { which, reason: e.to_string() };
    let filter = SeccompFilter::new(rules, SeccompAction::Allow, action, TargetArch::x86_64).map_err(err)?;
    BpfProgram::try_from(filter).map_err(err)
}

/// The native-arch prefix: kill non-x86-64 audit arches and x32 syscall numbers.
fn arch_prefix() -> Vec<SockFilter> {
    let stmt = |code: u16, k: u32| SockFilter { code, jt: 0, jf: 0, k };
    let jump = |code: u16, k: u32, jt: u8, jf: u8| SockFilter { code, jt, jf, k };
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x15;
    const JGE_K: u16 = 0x35;
    const RET_K: u16 = 0x06;
    vec![
        stmt(LD_W_ABS, 4), // seccomp_data.arch
        jump(JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(RET_K, SECCOMP_RET_KILL_PROCESS),
        stmt(LD_W_ABS, 0), // seccomp_data.nr
        jump(JGE_K, X32_SYSCALL_BIT, 0, 1),
        stmt(RET_K, SECCOMP_RET_KILL_PROCESS),
    ]
}

fn add_rules(map: &mut BTreeMap<i64, Vec<SeccompRule>>, calls: Vec<Deny>) -> Result<(), SeccompError> {
    for d in calls {
        let entry = map.entry(d.nr).or_default();
        for conds in d.rules {
            let rule =
                SeccompRule::new(conds).map_err(|e| SeccompError::Compile { which: "rule", reason: e.to_string() })?;
            entry.push(rule);
        }
    }
    Ok(())
}

/// Compiles the policy's filters.
pub fn prepare(policy: &Policy) -> Result<SeccompPlan, SeccompError> {
    let sc = &policy.seccomp;
    if !sys::seccomp_available() {
        if sc.required {
            return Err(SeccompError::Unavailable);
        }
        return Ok(SeccompPlan {
            filters: Vec::new(),
            exec: ExecGuard::None,
            denied: Vec::new(),
            killed: Vec::new(),
            allowed: sc.allow.clone(),
            enabled: false,
        });
    }
    let exec = if sc.allow.contains(&SyscallGroup::Exec) { ExecGuard::None } else { ExecGuard::Supervised };
    let mut errno_rules = BTreeMap::new();
    let mut notify_rules = BTreeMap::new();
    let mut denied = Vec::new();
    let mut killed = Vec::new();
    for g in SyscallGroup::ALL {
        if sc.allow.contains(&g) {
            continue;
        }
        let kill = sc.kill.contains(&g);
        if kill {
            killed.push(g);
        } else {
            denied.push(g);
        }
        // Exec always goes to the supervisor; other groups by their action.
        let notify = kill || g == SyscallGroup::Exec;
        add_rules(if notify { &mut notify_rules } else { &mut errno_rules }, group_calls(g))?;
    }
    let mut filters = Vec::new();
    let mut errno = arch_prefix();
    errno.extend(compile("errno", errno_rules, SeccompAction::Errno(libc::EPERM as u32))?);
    filters.push((errno, false));
    if !sc.allow.contains(&SyscallGroup::Namespaces) {
        let mut clone3 = BTreeMap::new();
        clone3.insert(libc::SYS_clone3, Vec::new());
        filters.push((compile("enosys", clone3, SeccompAction::Errno(libc::ENOSYS as u32))?, false));
    }
    if !notify_rules.is_empty() {
        let mut notify = compile("notify", notify_rules, SeccompAction::Errno(NOTIFY_SENTINEL))?;
        for ins in &mut notify {
            if ins.code == 0x06 && ins.k == SECCOMP_RET_ERRNO | NOTIFY_SENTINEL {
                ins.k = SECCOMP_RET_USER_NOTIF;
            }
        }
        filters.push((notify, true));
    }
    Ok(SeccompPlan { filters, exec, denied, killed, allowed: sc.allow.clone(), enabled: true })
}

/// Child side: install every filter; the listener (if any) goes to the supervisor over `sync`.
/// On failure returns the index of the filter and the errno.
pub fn apply(plan: &SeccompPlan, sync: i32) -> Result<(), (u32, Errno)> {
    for (i, (prog, listener)) in plan.filters.iter().enumerate() {
        let step = u32::try_from(i).unwrap_or(u32::MAX);
        if let Some(fd) = sys::seccomp_install(prog, *listener).map_err(|e| (step, e))? {
            let sent = sys::send_fd(sync, fd);
            sys::close(fd);
            sent.map_err(|e| (step, e))?;
        }
    }
    Ok(())
}

impl SeccompPlan {
    /// Whether a listener fd will come from the child.
    pub fn has_listener(&self) -> bool {
        self.filters.iter().any(|(_, l)| *l)
    }

    /// The action for a violation of this group: kill the run, or fail the call.
    pub fn kills(&self, g: SyscallGroup) -> bool {
        self.killed.contains(&g)
    }

    pub fn report(&self) -> LayerReport {
        let names = |v: &[SyscallGroup]| {
            if v.is_empty() { "none".to_string() } else { v.iter().map(|g| g.name()).collect::<Vec<_>>().join(", ") }
        };
        if !self.enabled {
            return LayerReport::new("seccomp", "filters", "none").with_status(
                crate::report::Enforcement::NotEnforced,
                "this kernel has no seccomp filter support (seccomp.required = false)",
            );
        }
        let asked = format!(
            "deny (EPERM): {}; kill the run: {}; allowed by the policy: {}; x32 and i386 entry points killed",
            names(&self.denied),
            names(&self.killed),
            names(&self.allowed)
        );
        let exec = match self.exec {
            ExecGuard::None => "exec not restricted",
            ExecGuard::Supervised => "the supervisor lets the exec that starts the program through, then no other",
        };
        let applied = format!(
            "{} filters, {} BPF instructions; {exec}",
            self.filters.len(),
            self.filters.iter().map(|(f, _)| f.len()).sum::<usize>()
        );
        LayerReport::new("seccomp", &asked, &applied)
    }
}
