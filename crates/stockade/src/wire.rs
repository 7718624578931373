//! What the jail's child tells its supervisor, in one place: the stages of the jail (the child's
//! straight line, in order) and the fixed-size messages on the report pipe — encoded by the child
//! (no allocation: a stack array), decoded by the supervisor.
//!
//! Imports (layers): `sys`.

use crate::sys::Errno;

/// The steps of the jail, in the order the child runs them. The number goes over the report
/// pipe; the parent turns it into words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u32)]
pub enum Stage {
    /// Parent-death signal armed before anything else.
    ParentDeath = 1,
    /// Moved itself into the run's v1 cgroup leaves.
    Cgroup = 2,
    /// stdio in place, every other fd closed.
    Fds = 3,
    /// Waiting for the parent to write the id maps.
    Release = 4,
    /// Groups, gid, uid.
    Identity = 5,
    /// New root built, old root detached, cwd set.
    Filesystem = 6,
    /// Hostname in the uts namespace.
    Hostname = 7,
    /// With an egress list: loopback up, the proxy's socket listening and handed over.
    Network = 8,
    /// New session, new keyring.
    Session = 9,
    /// Resource limits.
    Rlimits = 10,
    /// Every capability dropped, securebits locked, no_new_privs.
    Privileges = 11,
    /// Rules for the jail's own objects added, ruleset enforced.
    Landlock = 12,
    /// Filters installed, listener handed to the supervisor.
    Seccomp = 13,
    /// Parent-death signal re-armed (changing ids cleared it), parent still alive, not dumpable.
    Watch = 14,
    /// Signal mask and handlers reset.
    Signals = 15,
    /// Parked until the supervisor starts the run (at once, or later for a prestarted jail).
    Go = 16,
    /// init starts the program.
    Spawn = 17,
    /// `execveat` of the prepared fd.
    Exec = 18,
}

impl Stage {
    pub const ALL: [Stage; 18] = [
        Stage::ParentDeath,
        Stage::Cgroup,
        Stage::Fds,
        Stage::Release,
        Stage::Identity,
        Stage::Filesystem,
        Stage::Hostname,
        Stage::Network,
        Stage::Session,
        Stage::Rlimits,
        Stage::Privileges,
        Stage::Landlock,
        Stage::Seccomp,
        Stage::Watch,
        Stage::Signals,
        Stage::Go,
        Stage::Spawn,
        Stage::Exec,
    ];

    pub fn from_u32(n: u32) -> Option<Stage> {
        Stage::ALL.iter().copied().find(|s| *s as u32 == n)
    }

    pub fn name(self) -> &'static str {
        match self {
            Stage::ParentDeath => "parent-death signal",
            Stage::Cgroup => "cgroup",
            Stage::Fds => "file descriptors",
            Stage::Release => "release by the supervisor",
            Stage::Filesystem => "filesystem",
            Stage::Hostname => "hostname",
            Stage::Network => "network",
            Stage::Session => "session",
            Stage::Rlimits => "rlimits",
            Stage::Identity => "identity",
            Stage::Privileges => "privileges",
            Stage::Landlock => "landlock",
            Stage::Seccomp => "seccomp",
            Stage::Watch => "supervisor watch",
            Stage::Signals => "signals",
            Stage::Go => "start",
            Stage::Spawn => "spawn",
            Stage::Exec => "exec",
        }
    }
}

/// A failed step: the stage, a stage-specific detail (e.g. the index of a mount op), the errno.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    pub stage: Stage,
    pub detail: u32,
    pub errno: Errno,
}

/// A message on the report pipe: 16 bytes, native endian (tag, stage, detail, value).
pub const MSG_LEN: usize = 16;
const TAG_FAILURE: u32 = 1;
const TAG_EXIT: u32 = 2;
const TAG_USAGE: u32 = 3;
const TAG_EMPTIED: u32 = 4;

/// One message from the child.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Msg {
    /// A step of the jail failed (setup, spawn or the program's exec).
    Failure(Failure),
    /// The program ended with this wait status (init reports it, then exits).
    Exit(i32),
    /// One figure of what the run's processes used, all of them reaped (init's children).
    Usage(Usage, u64),
    /// Init (of a pid namespace) killed and reaped every other process of the run and sent its
    /// usage: nothing of the run runs any more, and init exits next.
    Emptied,
}

/// The figures of [`Msg::Usage`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Usage {
    /// User CPU time, microseconds.
    UserMicros = 1,
    /// System CPU time, microseconds.
    SystemMicros = 2,
    /// The largest resident set of one process, bytes.
    MaxRssBytes = 3,
}

/// The low 32 bits of `v`, as the bits of an `i32` (a message's `value`).
fn low_half(v: u64) -> i32 {
    i32::from_ne_bytes(u32::try_from(v & 0xFFFF_FFFF).unwrap_or(0).to_ne_bytes())
}

impl Usage {
    fn from_u32(n: u32) -> Option<Usage> {
        [Usage::UserMicros, Usage::SystemMicros, Usage::MaxRssBytes].into_iter().find(|u| *u as u32 == n)
    }
}

impl Msg {
    /// The message's bytes (child side: a stack array, nothing allocated).
    pub fn encode(self) -> [u8; MSG_LEN] {
        let (tag, stage, detail, value) = match self {
            Msg::Failure(f) => (TAG_FAILURE, f.stage as u32, f.detail, f.errno.0),
            Msg::Exit(status) => (TAG_EXIT, 0, 0, status),
            // A 64-bit figure: its high half in `detail`, its low half in `value`.
            Msg::Usage(u, v) => (TAG_USAGE, u as u32, (v >> 32) as u32, low_half(v)),
            Msg::Emptied => (TAG_EMPTIED, 0, 0, 0),
        };
        let mut msg = [0u8; MSG_LEN];
        msg[0..4].copy_from_slice(&tag.to_ne_bytes());
        msg[4..8].copy_from_slice(&stage.to_ne_bytes());
        msg[8..12].copy_from_slice(&detail.to_ne_bytes());
        msg[12..16].copy_from_slice(&value.to_ne_bytes());
        msg
    }

    /// Reads one message (supervisor side); `None` for bytes no child sends.
    pub fn decode(b: &[u8; MSG_LEN]) -> Option<Msg> {
        let word = |i: usize| [b[i], b[i + 1], b[i + 2], b[i + 3]];
        let value = i32::from_ne_bytes(word(12));
        match u32::from_ne_bytes(word(0)) {
            TAG_FAILURE => Some(Msg::Failure(Failure {
                stage: Stage::from_u32(u32::from_ne_bytes(word(4)))?,
                detail: u32::from_ne_bytes(word(8)),
                errno: Errno(value),
            })),
            TAG_EXIT => Some(Msg::Exit(value)),
            TAG_USAGE => Some(Msg::Usage(
                Usage::from_u32(u32::from_ne_bytes(word(4)))?,
                (u64::from(u32::from_ne_bytes(word(8))) << 32) | u64::from(u32::from_ne_bytes(word(12))),
            )),
            TAG_EMPTIED => Some(Msg::Emptied),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_read_back_as_written() {
        let f = Failure { stage: Stage::Landlock, detail: 3, errno: Errno(libc::EPERM) };
        let usage = [
            Msg::Usage(Usage::UserMicros, 0),
            Msg::Usage(Usage::SystemMicros, u64::MAX),
            Msg::Usage(Usage::MaxRssBytes, 0x1_8000_0001),
        ];
        for m in [Msg::Failure(f), Msg::Exit(0x8b00), Msg::Exit(-1), Msg::Emptied].into_iter().chain(usage) {
            assert_eq!(Msg::decode(&m.encode()), Some(m));
        }
        let mut bad = Msg::Exit(0).encode();
        bad[0] = 9;
        assert_eq!(Msg::decode(&bad), None);
        let mut no_stage = Msg::Failure(f).encode();
        no_stage[4..8].copy_from_slice(&99u32.to_ne_bytes());
        assert_eq!(Msg::decode(&no_stage), None);
        let mut no_figure = Msg::Usage(Usage::UserMicros, 1).encode();
        no_figure[4..8].copy_from_slice(&9u32.to_ne_bytes());
        assert_eq!(Msg::decode(&no_figure), None);
    }
}
