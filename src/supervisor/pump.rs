//! The event loop of a running jail: one thread, one `ppoll` over the run's init (its pidfd), the
//! output pipes, the report pipe, the seccomp listener, the stdin feed and the caller's output
//! fds; the deadline is its timeout.

use super::channels::{BATCH, CHUNK, Feed, PIPE_BUF, SMALL_READ, Stream};
use crate::child;
use crate::error::Error;
use crate::layers::cgroup::Leaf;
use crate::layers::seccomp::{self, ExecGuard, SeccompPlan};
use crate::policy::SyscallGroup;
use crate::report::Violation;
use crate::sys::{self, Errno};
use crate::wire::{Failure, MSG_LEN, Msg};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

/// What the loop saw.
pub(super) struct Outcome {
    pub(super) reaped: sys::Reaped,
    pub(super) reaped_at: Instant,
    pub(super) failure: Option<Failure>,
    pub(super) exit_status: Option<i32>,
    pub(super) timed_out: bool,
    pub(super) violation: Option<Violation>,
}

/// How long init gets, after the deadline signal, to kill and reap the run before SIGKILL.
const KILL_GRACE: Duration = Duration::from_millis(50);

/// The event loop: until init is reaped and every pipe reached end of file.
/// The run being supervised.
pub(super) struct Run<'a> {
    pub(super) pid: i32,
    pub(super) pidfd: &'a OwnedFd,
    /// The release channel; the child sends the seccomp listener over it.
    pub(super) sync: &'a OwnedFd,
    pub(super) seccomp: &'a SeccompPlan,
    pub(super) pid_namespace: bool,
    /// The run's cgroup leaves: `cgroup.kill` takes the whole tree.
    pub(super) leaf: Option<&'a Leaf>,
}

pub(super) fn pump(
    run: Run<'_>,
    report: OwnedFd,
    streams: &mut [Stream],
    mut feed: Option<Feed>,
    deadline: Instant,
) -> Result<Outcome, Error> {
    let Run { pid, pidfd, sync, seccomp: sc, pid_namespace, leaf } = run;
    let mut want_listener = sc.has_listener();
    let mut listener: Option<OwnedFd> = None;
    let mut exec_seen = false;
    let mut violation: Option<Violation> = None;
    let sv = |what: &'static str| move |errno: Errno| Error::Supervisor { what, errno };
    let mut report = Some(report);
    let mut msgs: Vec<u8> = Vec::new();
    let mut failure = None;
    let mut exit_status = None;
    let mut reaped: Option<(sys::Reaped, Instant)> = None;
    let mut killed = false;
    let mut timed_out = false;
    // With a pid namespace, init first gets the deadline signal (it kills and reaps the run, so
    // CPU time is accounted); SIGKILL to init at `kill_at` is the backstop.
    let mut kill_at = deadline;
    let mut buf = vec![0u8; CHUNK];
    loop {
        let inputs_open = report.is_some() || streams.iter().any(|s| s.fd.is_some());
        if reaped.is_some() && !inputs_open {
            break;
        }
        let now = Instant::now();
        if reaped.is_some() && now >= deadline {
            // Only without a pid namespace can a process outlive init and hold a pipe open.
            break;
        }
        let mut fds: Vec<libc::pollfd> = Vec::with_capacity(7);
        let mut roles: Vec<Role> = Vec::with_capacity(7);
        let mut add = |fd: RawFd, events: libc::c_short, role: Role| {
            fds.push(libc::pollfd { fd, events, revents: 0 });
            roles.push(role);
        };
        if reaped.is_none() {
            add(pidfd.as_raw_fd(), libc::POLLIN, Role::Pidfd);
        }
        if want_listener {
            add(sync.as_raw_fd(), libc::POLLIN, Role::Sync);
        }
        if let Some(l) = &listener {
            add(l.as_raw_fd(), libc::POLLIN, Role::Listener);
        }
        if let Some(r) = &report {
            add(r.as_raw_fd(), libc::POLLIN, Role::Report);
        }
        let mut wake: Option<Instant> = (!killed).then_some(kill_at);
        for (i, s) in streams.iter().enumerate() {
            if let Some(fd) = &s.fd {
                // Once the run is reaped, drain at once.
                match s.quiet_until.filter(|t| *t > now && reaped.is_none()) {
                    Some(t) => wake = Some(wake.map_or(t, |w| w.min(t))),
                    None => add(fd.as_raw_fd(), libc::POLLIN, Role::Read(i)),
                }
            }
            if let Some(fd) = s.sink.wants_write() {
                add(fd, libc::POLLOUT, Role::Write(i));
            }
        }
        if reaped.is_some() {
            // Nobody left to read it.
            feed = None;
        }
        if let Some(f) = &feed {
            add(f.fd.as_raw_fd(), libc::POLLOUT, Role::Feed);
        }
        let timeout = wake.map(|w| w.saturating_duration_since(now));
        let n = match sys::ppoll(&mut fds, timeout) {
            Ok(n) => n,
            Err(Errno(libc::EINTR)) => continue,
            Err(e) => return Err(sv("poll")(e)),
        };
        if n == 0 {
            let now = Instant::now();
            if !killed && reaped.is_none() && now >= kill_at {
                if pid_namespace && !timed_out {
                    timed_out = true;
                    kill_at = now + KILL_GRACE;
                    let _ = sys::pidfd_send_signal(pidfd.as_fd(), child::DEADLINE_SIGNAL);
                } else {
                    super::kill_run(pid, pidfd.as_fd(), leaf, pid_namespace);
                    killed = true;
                    timed_out = true;
                }
            }
            continue;
        }
        for (p, role) in fds.iter().zip(roles.iter()) {
            if p.revents == 0 {
                continue;
            }
            match *role {
                Role::Pidfd => {
                    let r = sys::waitid_pidfd(pidfd.as_fd()).map_err(sv("reap the run"))?;
                    reaped = Some((r, Instant::now()));
                }
                Role::Report => {
                    let fd = report.as_ref().map(AsRawFd::as_raw_fd).unwrap_or(-1);
                    match sys::read(fd, &mut buf) {
                        Ok(0) | Err(_) => report = None,
                        Ok(k) => {
                            msgs.extend_from_slice(&buf[..k]);
                            while msgs.len() >= MSG_LEN {
                                let mut m = [0u8; MSG_LEN];
                                m.copy_from_slice(&msgs[..MSG_LEN]);
                                msgs.drain(..MSG_LEN);
                                match Msg::decode(&m) {
                                    Some(Msg::Failure(f)) if failure.is_none() => failure = Some(f),
                                    Some(Msg::Exit(status)) => exit_status = Some(status),
                                    _ => {}
                                }
                            }
                        }
                    }
                }
                Role::Read(i) => {
                    let s = &mut streams[i];
                    let fd = s.fd.as_ref().map(AsRawFd::as_raw_fd).unwrap_or(-1);
                    match sys::read(fd, &mut buf) {
                        Ok(0) | Err(_) => s.fd = None,
                        Ok(k) => {
                            s.sink.push(&buf[..k]);
                            s.quiet_until = (k < SMALL_READ).then(|| Instant::now() + BATCH);
                        }
                    }
                }
                Role::Write(i) => streams[i].sink.write_some(PIPE_BUF),
                Role::Feed => {
                    let Some(f) = &mut feed else { continue };
                    // POLLERR: the program closed its end; anything else: write what fits.
                    let done = match sys::write(f.fd.as_raw_fd(), &f.data[f.at..]) {
                        Ok(k) => {
                            f.at += k;
                            f.at >= f.data.len()
                        }
                        Err(Errno(libc::EAGAIN)) => false,
                        Err(_) => true,
                    };
                    if done {
                        // Closing the pipe is the program's end of file.
                        feed = None;
                    }
                }
                Role::Sync => {
                    want_listener = false;
                    if p.revents & libc::POLLIN != 0 {
                        listener = sys::recv_fd(sync.as_fd()).ok().flatten();
                    }
                }
                Role::Listener => {
                    if p.revents & libc::POLLIN == 0 {
                        // Every process the filter applied to is gone.
                        listener = None;
                        continue;
                    }
                    let Some(l) = &listener else { continue };
                    let Ok(n) = sys::seccomp_notif_recv(l.as_fd()) else { continue };
                    let (name, group) =
                        seccomp::syscall_name(n.nr, &n.args).unwrap_or(("unknown", SyscallGroup::Admin));
                    let first_exec = group == SyscallGroup::Exec
                        && sc.exec == ExecGuard::Supervised
                        && !std::mem::replace(&mut exec_seen, true);
                    if first_exec {
                        // The exec that starts the program: it runs before any of its code.
                        let _ = sys::seccomp_notif_send(l.as_fd(), n.id, Ok(()));
                    } else if sc.kills(group) {
                        let _ = sys::seccomp_notif_send(l.as_fd(), n.id, Err(libc::EPERM));
                        if violation.is_none() {
                            violation = Some(Violation {
                                syscall: name.to_string(),
                                number: n.nr,
                                group: group.name().to_string(),
                            });
                        }
                        if !killed && reaped.is_none() {
                            super::kill_run(pid, pidfd.as_fd(), leaf, pid_namespace);
                            killed = true;
                        }
                    } else {
                        let _ = sys::seccomp_notif_send(l.as_fd(), n.id, Err(libc::EPERM));
                    }
                }
            }
        }
    }
    let (reaped, reaped_at) = match reaped {
        Some(r) => r,
        None => return Err(Error::Supervisor { what: "reap the run", errno: Errno(libc::ECHILD) }),
    };
    Ok(Outcome { reaped, reaped_at, failure, exit_status, timed_out, violation })
}

#[derive(Clone, Copy)]
enum Role {
    Sync,
    Listener,
    Pidfd,
    Report,
    Read(usize),
    Write(usize),
    Feed,
}
