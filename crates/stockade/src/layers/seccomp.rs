//! Seccomp: the system calls the program may not make, compiled to BPF in the parent.
//!
//! One filter (see `bpf.rs` for why it is compiled here rather than by `seccompiler`, which
//! stays as the test oracle), with an answer per group:
//! - **EPERM** for the denied groups (the default action);
//! - **ENOSYS** for `clone3`, so libc falls back to `clone`, whose flags a filter can see;
//! - **notify** for the groups whose violation kills the run, and for exec: the supervisor holds
//!   the listener, learns the syscall, and kills the run (reporting `seccomp-violation` with the
//!   name) or answers.
//!
//! The filter starts with an architecture check that kills any call not made through the
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
use crate::layers::bpf::{self, Action, Entry, Test};
use crate::policy::{Policy, SyscallGroup};
use crate::sys::{self, Errno, SockFilter};

/// The two tty ioctls of the `tty-inject` group (request numbers, an unsigned int).
const TIOCSTI: u32 = 0x5412;
const TIOCLINUX: u32 = 0x541C;
const EPERM: u16 = 1;
/// `open_tree_attr` (Linux 6.15), not yet in the libc crate.
const SYS_OPEN_TREE_ATTR: i64 = 467;
/// The socket type lives in the low bits of `socket`'s type argument (flags above).
const SOCK_TYPE_MASK: u32 = 0xf;
const SOCK_DGRAM: u32 = libc::SOCK_DGRAM as u32;
const ENOSYS: u16 = 38;

const NS_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | 0x80) as u32; // CLONE_NEWTIME

#[derive(Debug, thiserror::Error)]
pub enum SeccompError {
    #[error(
        "seccomp: this kernel has no seccomp filter support (CONFIG_SECCOMP_FILTER); run on a kernel with it, or \
         set seccomp.required = false"
    )]
    Unavailable,
    #[error(
        "seccomp: a program that serves turns (a live session of a program runtime) says each turn's end by \
         reading its stdin, which the supervisor sees through seccomp's user notification; this kernel has no \
         seccomp filter support, and seccomp.required = false cannot give it: use a kernel with \
         CONFIG_SECCOMP_FILTER, or a Wasm runtime for live sessions"
    )]
    TurnsUnavailable,
}

/// One denied system call, with the rules under which it is denied (none: always).
pub(crate) struct Deny {
    pub name: &'static str,
    pub nr: i64,
    pub rules: Vec<Vec<(u8, Test)>>,
}

fn always(name: &'static str, nr: i64) -> Deny {
    Deny { name, nr, rules: Vec::new() }
}

/// The system calls of a group, as denied.
pub(crate) fn group_calls(g: SyscallGroup) -> Vec<Deny> {
    use SyscallGroup as G;
    match g {
        G::Network => vec![
            Deny { name: "socket", nr: libc::SYS_socket, rules: vec![vec![(0, Test::Ne(libc::AF_UNIX as u32))]] },
            Deny {
                name: "socketpair",
                nr: libc::SYS_socketpair,
                rules: vec![vec![(0, Test::Ne(libc::AF_UNIX as u32))]],
            },
        ],
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
            Deny { name: "clone", nr: libc::SYS_clone, rules: vec![vec![(0, Test::AnyBits(NS_FLAGS))]] },
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
            always("open_tree_attr", SYS_OPEN_TREE_ATTR),
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
            rules: vec![vec![(0, Test::Ne(0)), (0, Test::Ne(0xffff_ffff))]],
        }],
        G::TtyInject => vec![Deny {
            name: "ioctl",
            nr: libc::SYS_ioctl,
            // The request is an unsigned int: only its low 32 bits count.
            rules: vec![vec![(1, Test::Eq(TIOCSTI))], vec![(1, Test::Eq(TIOCLINUX))]],
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
        G::UnixConnect => {
            // Only unix sockets exist without the network group; a datagram one can send to any
            // socket file by name, a stream or seqpacket one only through connect.
            let unix_dgram = vec![(0, Test::Eq(libc::AF_UNIX as u32)), (1, Test::MaskedEq(SOCK_TYPE_MASK, SOCK_DGRAM))];
            vec![
                always("connect", libc::SYS_connect),
                Deny { name: "socket", nr: libc::SYS_socket, rules: vec![unix_dgram.clone()] },
                Deny { name: "socketpair", nr: libc::SYS_socketpair, rules: vec![unix_dgram] },
            ]
        }
        G::ExoticMemory => {
            vec![always("modify_ldt", libc::SYS_modify_ldt), always("memfd_secret", libc::SYS_memfd_secret)]
        }
        G::HostCounters => vec![always("sysinfo", libc::SYS_sysinfo)],
    }
}

/// The name and group of a call the filter sent to the supervisor, among the ones stockade
/// filters: the group whose rules the arguments meet (`socket` is `network` or `unix-connect`
/// by its arguments).
pub fn syscall_name(nr: i32, args: &[u64; 6]) -> Option<(&'static str, SyscallGroup)> {
    if i64::from(nr) == libc::SYS_clone3 {
        return Some(("clone3", SyscallGroup::Namespaces));
    }
    let holds = |rule: &Vec<(u8, Test)>| {
        rule.iter().all(|&(arg, t)| {
            // The filter tests the low 32 bits of each argument.
            #[allow(clippy::cast_possible_truncation)]
            let a = args.get(usize::from(arg)).copied().unwrap_or(0) as u32;
            match t {
                Test::Eq(v) => a == v,
                Test::Ne(v) => a != v,
                Test::AnyBits(m) => a & m != 0,
                Test::MaskedEq(m, v) => a & m == v,
            }
        })
    };
    let calls = || SyscallGroup::ALL.into_iter().flat_map(|g| group_calls(g).into_iter().map(move |d| (d, g)));
    calls()
        .find(|(d, _)| d.nr == i64::from(nr) && (d.rules.is_empty() || d.rules.iter().any(holds)))
        .or_else(|| calls().find(|(d, _)| d.nr == i64::from(nr)))
        .map(|(d, g)| (d.name, g))
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
    /// The program reaches its egress proxy: TCP sockets and `connect` ([`egress_calls`]).
    egress: bool,
    /// `process.exec-allow`: the execs after the first the supervisor lets through (`exec.rs`).
    pub exec_allow: Option<super::exec::ExecAllow>,
}

/// What a policy with an egress list lets its program do with sockets instead of the `network`
/// and `unix-connect` groups: TCP sockets (IPv4 or IPv6) and `connect`, nothing else of the
/// network. `connect` cannot be told a TCP socket's from a unix one's, so no unix socket is made
/// by `socket` unless `unix-connect` is allowed (a socket pair still is, but not a datagram one,
/// which `connect` could point at any socket file); no `bind` or `listen` (a program's server
/// on its loopback), no send that connects (TCP Fast Open's `MSG_FASTOPEN`).
pub(crate) fn egress_calls(unix_connect: bool) -> Vec<Deny> {
    const INET: [u32; 2] = [libc::AF_INET as u32, libc::AF_INET6 as u32];
    // The socket types but a stream (the kernel knows no other below 11).
    const NOT_STREAM: [u32; 6] = [2, 3, 4, 5, 6, 10];
    const FASTOPEN: u32 = libc::MSG_FASTOPEN as u32;
    let mut other_family = vec![(0, Test::Ne(INET[0])), (0, Test::Ne(INET[1]))];
    if unix_connect {
        other_family.push((0, Test::Ne(libc::AF_UNIX as u32)));
    }
    let mut socket = vec![other_family];
    for family in INET {
        socket.extend(NOT_STREAM.map(|t| vec![(0, Test::Eq(family)), (1, Test::MaskedEq(SOCK_TYPE_MASK, t))]));
        socket.push(vec![(0, Test::Eq(family)), (2, Test::Ne(0)), (2, Test::Ne(libc::IPPROTO_TCP as u32))]);
    }
    let mut pair = vec![vec![(0, Test::Ne(libc::AF_UNIX as u32))]];
    if !unix_connect {
        pair.push(vec![(1, Test::MaskedEq(SOCK_TYPE_MASK, SOCK_DGRAM))]);
    }
    vec![
        Deny { name: "socket", nr: libc::SYS_socket, rules: socket },
        Deny { name: "socketpair", nr: libc::SYS_socketpair, rules: pair },
        always("bind", libc::SYS_bind),
        always("listen", libc::SYS_listen),
        Deny { name: "sendto", nr: libc::SYS_sendto, rules: vec![vec![(3, Test::AnyBits(FASTOPEN))]] },
        Deny { name: "sendmsg", nr: libc::SYS_sendmsg, rules: vec![vec![(2, Test::AnyBits(FASTOPEN))]] },
        Deny { name: "sendmmsg", nr: libc::SYS_sendmmsg, rules: vec![vec![(3, Test::AnyBits(FASTOPEN))]] },
    ]
}

/// The filter's entries for a policy: every call of every group not allowed, with its action;
/// `egress`: the policy's program reaches its proxy ([`egress_calls`] in place of the `network`
/// and `unix-connect` groups, answered as `network`'s would be).
pub(crate) fn entries(allow: &[SyscallGroup], kill: &[SyscallGroup], egress: bool) -> Vec<Entry> {
    let mut out = Vec::new();
    for g in SyscallGroup::ALL {
        if allow.contains(&g) || (egress && g == SyscallGroup::UnixConnect) {
            continue;
        }
        // Exec always goes to the supervisor (it lets the first through), and the host's
        // counters (it answers with the run's own); other groups by action.
        let supervised = matches!(g, SyscallGroup::Exec | SyscallGroup::HostCounters);
        let action = if kill.contains(&g) || supervised { Action::Notify } else { Action::Errno(EPERM) };
        let calls = if egress && g == SyscallGroup::Network {
            egress_calls(allow.contains(&SyscallGroup::UnixConnect))
        } else {
            group_calls(g)
        };
        for d in calls {
            out.push(Entry { nr: u32::try_from(d.nr).unwrap_or(u32::MAX), rules: d.rules, action });
        }
    }
    if !allow.contains(&SyscallGroup::Namespaces) {
        let action = if kill.contains(&SyscallGroup::Namespaces) { Action::Notify } else { Action::Errno(ENOSYS) };
        out.push(Entry { nr: u32::try_from(libc::SYS_clone3).unwrap_or(u32::MAX), rules: vec![], action });
    }
    out
}

/// Compiles the policy's filter; `turn_reads`: every `read(2)` of fd 0 goes to the supervisor
/// too (a program that says its turns' ends so, see [`crate::TurnEnd::Read`]).
pub fn prepare(policy: &Policy, turn_reads: bool) -> Result<SeccompPlan, SeccompError> {
    let sc = &policy.seccomp;
    if !sys::seccomp_available() {
        if turn_reads {
            return Err(SeccompError::TurnsUnavailable);
        }
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
            egress: false,
            exec_allow: None,
        });
    }
    let exec = if sc.allow.contains(&SyscallGroup::Exec) { ExecGuard::None } else { ExecGuard::Supervised };
    let denied: Vec<SyscallGroup> =
        SyscallGroup::ALL.into_iter().filter(|g| !sc.allow.contains(g) && !sc.kill.contains(g)).collect();
    let killed: Vec<SyscallGroup> = SyscallGroup::ALL.into_iter().filter(|g| sc.kill.contains(g)).collect();
    let egress = policy.network.egress();
    let mut entries = entries(&sc.allow, &sc.kill, egress);
    if turn_reads {
        let nr = u32::try_from(libc::SYS_read).unwrap_or(u32::MAX);
        entries.push(Entry { nr, rules: vec![vec![(0, Test::Eq(0))]], action: Action::Notify });
    }
    let listener = entries.iter().any(|e| e.action == Action::Notify);
    let filters = vec![(bpf::compile(entries), listener)];
    Ok(SeccompPlan {
        filters,
        exec,
        denied,
        killed,
        allowed: sc.allow.clone(),
        enabled: true,
        egress,
        exec_allow: None,
    })
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
    /// Whether the plan installs any filter (the kernel has seccomp, and the policy wants it).
    pub fn has_filters(&self) -> bool {
        self.enabled
    }

    /// Whether a listener fd will come from the child.
    pub fn has_listener(&self) -> bool {
        self.filters.iter().any(|(_, l)| *l)
    }

    /// Whether the filter keeps the program from this group's calls (denied, or the run killed;
    /// with an egress list, `network` is not: TCP sockets are made).
    pub fn refuses(&self, g: SyscallGroup) -> bool {
        self.enabled && !self.allowed.contains(&g) && !(self.egress && g == SyscallGroup::Network)
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
            ExecGuard::Supervised if self.exec_allow.is_some() => {
                "the supervisor lets the exec that starts the program through, then only those of the files \
                 process.exec-allow lists"
            }
            ExecGuard::Supervised => "the supervisor lets the exec that starts the program through, then no other",
        };
        let exec = if self.allowed.contains(&SyscallGroup::HostCounters)
            || self.killed.contains(&SyscallGroup::HostCounters)
        {
            exec.to_string()
        } else {
            format!("{exec}; sysinfo answered with the run's own figures")
        };
        let exec = if self.egress {
            format!(
                "{exec}; network: TCP sockets (IPv4, IPv6) and connect for the egress proxy, no bind, listen, UDP, \
                 raw or other socket, no TCP Fast Open send{}",
                if self.allowed.contains(&SyscallGroup::UnixConnect) { "" } else { ", no unix socket but a pair" }
            )
        } else {
            exec
        };
        let applied = format!(
            "{} BPF instructions in {} filter; {exec}",
            self.filters.iter().map(|(f, _)| f.len()).sum::<usize>(),
            self.filters.len()
        );
        LayerReport::new("seccomp", &asked, &applied)
    }
}

#[cfg(test)]
mod tests {
    //! The compact filter agrees with one `seccompiler` builds from the same groups, on every
    //! syscall number and the arguments the rules look at.
    use super::*;
    use crate::layers::bpf::interp;
    use seccompiler::{
        BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter, SeccompRule,
        TargetArch,
    };
    use std::collections::BTreeMap;

    fn oracle(entries: &[Entry]) -> Vec<Vec<SockFilter>> {
        // seccompiler has one action per filter: one filter per action, the kernel keeps the
        // strictest answer (which `run_all` below mimics).
        let mut by_action: BTreeMap<Action, BTreeMap<i64, Vec<SeccompRule>>> = BTreeMap::new();
        for e in entries {
            let rules = by_action.entry(e.action).or_default().entry(i64::from(e.nr)).or_default();
            for rule in &e.rules {
                let mut expanded: Vec<Vec<SeccompCondition>> = vec![vec![]];
                for &(arg, t) in rule {
                    let c = |op, v| SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, v).expect("cond");
                    match t {
                        Test::Eq(v) => expanded.iter_mut().for_each(|r| r.push(c(SeccompCmpOp::Eq, v.into()))),
                        Test::Ne(v) => expanded.iter_mut().for_each(|r| r.push(c(SeccompCmpOp::Ne, v.into()))),
                        Test::MaskedEq(m, v) => {
                            expanded.iter_mut().for_each(|r| r.push(c(SeccompCmpOp::MaskedEq(m.into()), v.into())))
                        }
                        Test::AnyBits(m) => {
                            // Any bit set: one rule per bit.
                            let base = expanded.pop().unwrap_or_default();
                            for bit in (0..32).map(|b| 1u32 << b).filter(|b| m & b != 0) {
                                let mut r = base.clone();
                                r.push(c(SeccompCmpOp::MaskedEq(bit.into()), bit.into()));
                                expanded.push(r);
                            }
                        }
                    }
                }
                rules.extend(expanded.into_iter().map(|c| SeccompRule::new(c).expect("rule")));
            }
        }
        by_action
            .into_iter()
            .map(|(action, rules)| {
                let act = match action {
                    Action::Errno(e) => SeccompAction::Errno(e.into()),
                    Action::Kill => SeccompAction::KillProcess,
                    // seccompiler has no notify action: a marker errno stands in for it.
                    Action::Notify => SeccompAction::Errno(0xBEEF),
                    Action::Allow => SeccompAction::Allow,
                };
                let f = SeccompFilter::new(rules, SeccompAction::Allow, act, TargetArch::x86_64).expect("filter");
                let prog: BpfProgram = f.try_into().expect("compile");
                prog.into_iter()
                    .map(|i| {
                        let k = if i.k == 0x0005_BEEF { Action::Notify.ret() } else { i.k };
                        SockFilter { code: i.code, jt: i.jt, jf: i.jf, k }
                    })
                    .collect()
            })
            .collect()
    }

    /// The kernel's precedence across stacked filters: kill, then errno, then notify, then allow.
    fn rank(ret: u32) -> u32 {
        match ret & 0xffff_0000 {
            0x8000_0000 | 0x0000_0000 => 0,
            0x0005_0000 => 2,
            0x7fc0_0000 => 3,
            _ => 9,
        }
    }

    #[test]
    fn constants_match_the_kernel_headers() {
        assert_eq!((u64::from(TIOCSTI), u64::from(TIOCLINUX)), (libc::TIOCSTI, libc::TIOCLINUX));
        assert_eq!((i32::from(EPERM), i32::from(ENOSYS)), (libc::EPERM, libc::ENOSYS));
    }

    #[test]
    fn compact_filter_agrees_with_seccompiler_for_every_call() {
        use SyscallGroup as G;
        for (allow, kill, egress) in [
            (vec![], vec![], false),
            (vec![G::Exec, G::Network], vec![G::Ptrace, G::Mount], false),
            (vec![G::Namespaces], vec![G::Personality, G::TtyInject], false),
            (vec![], vec![G::Namespaces, G::Network], false),
            (vec![G::Network, G::UnixConnect], vec![G::ExoticMemory], false),
            (vec![], vec![G::UnixConnect], false),
            (vec![], vec![], true),
            (vec![G::UnixConnect], vec![G::Network], true),
        ] {
            let entries = entries(&allow, &kill, egress);
            let ours = bpf::compile(entries.clone());
            let theirs = oracle(&entries);
            let theirs_len: usize = theirs.iter().map(Vec::len).sum();
            assert!(ours.len() * 2 < theirs_len, "{} vs {} instructions", ours.len(), theirs_len);
            let samples: [u64; 9] = [0, 1, 2, 10, 0xffff_ffff, 0x5412, 0x541c, 0x1_0000_0000, 0x1000_0000 | 0x11];
            let samples: Vec<u64> = samples.into_iter().chain([2 | 0x80000, 5, 0x80002]).collect();
            // A socket's protocol and a send's flags (egress looks at the third and fourth).
            let later: &[u64] = if egress { &[0, 6, 17, 0x2000_0000, 0x2000_0040] } else { &[0] };
            for nr in 0..470 {
                for &a in &samples {
                    for &b in &samples {
                        for &c in later {
                            let d = interp::Data { nr, arch: 0xc000_003e, args: [a, b, c, c, 0, 0] };
                            let mine = interp::run(&ours, &d);
                            let best = theirs
                                .iter()
                                .map(|p| interp::run(p, &d))
                                .min_by_key(|r| rank(*r))
                                .unwrap_or(0x7fff_0000);
                            assert_eq!(mine, best, "nr {nr} args {a:#x} {b:#x} {c:#x}, allow {allow:?} kill {kill:?}");
                        }
                    }
                }
            }
        }
    }
}
