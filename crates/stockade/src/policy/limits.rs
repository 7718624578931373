//! A run's limits, one type for every front: what a request of the service's API may set, what
//! `GET /v1/info` shows of each policy, what `stockade mcp`'s operator sets as the ceiling of
//! every call, and what a jail waiting at its gate takes at its start. One rule tightens them
//! ([`Limits::within`]): a limit is no looser than its ceiling and no lower than the least a jail
//! is built with, or it is refused, naming the key and the ceiling. Nothing is clamped.

use super::Policy;
use super::validate::{MEMORY_MAX_FLOOR, PIDS_MAX_FLOOR, WASM_MEMORY_FLOOR};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// A run's limits (each `None`: none asked, or the policy sets none).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Limits {
    /// The wall-clock limit, milliseconds (from the hand-over, for a jail built ahead).
    pub wall_timeout_ms: Option<u64>,
    /// The run's cgroup memory limit, bytes (needs a jail built for the run).
    pub memory_max_bytes: Option<u64>,
    /// The run's cgroup process and thread limit (needs a jail built for the run).
    pub pids_max: Option<u64>,
    /// Output kept (or streamed) of stdout, bytes; past it the policy's `output.over-cap`.
    pub stdout_max_bytes: Option<u64>,
    /// The same for stderr.
    pub stderr_max_bytes: Option<u64>,
    /// A Wasm guest's linear memory, bytes (needs a jail built for the run).
    pub wasm_memory_max_bytes: Option<u64>,
    /// A Wasm guest's fuel, about one unit per instruction (needs a jail built for the run).
    pub fuel: Option<u64>,
}

/// A limit refused: its key (`wall-timeout-ms`) and why, with the ceiling or the floor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitError {
    pub key: &'static str,
    pub message: String,
}

impl Limits {
    /// The keys, in order (as a request and `/v1/info` write them).
    pub const KEYS: [&'static str; 7] = [
        "wall-timeout-ms",
        "memory-max-bytes",
        "pids-max",
        "stdout-max-bytes",
        "stderr-max-bytes",
        "wasm-memory-max-bytes",
        "fuel",
    ];

    /// The least a jail is built (or a run held) with, by key.
    const FLOORS: [u64; 7] = [1, MEMORY_MAX_FLOOR, PIDS_MAX_FLOOR, 1, 1, WASM_MEMORY_FLOOR, 1];

    /// A policy's limits.
    pub fn of(p: &Policy) -> Limits {
        Limits {
            wall_timeout_ms: Some(u64::try_from(p.wall_timeout.as_millis()).unwrap_or(u64::MAX)),
            memory_max_bytes: p.cgroups.memory_max_bytes,
            pids_max: p.cgroups.pids_max,
            stdout_max_bytes: p.stdout_max_bytes,
            stderr_max_bytes: p.stderr_max_bytes,
            wasm_memory_max_bytes: Some(p.wasm.memory_max_bytes),
            fuel: p.wasm.fuel,
        }
    }

    /// Each limit, in the order of [`Limits::KEYS`].
    fn fields_mut(&mut self) -> [&mut Option<u64>; 7] {
        [
            &mut self.wall_timeout_ms,
            &mut self.memory_max_bytes,
            &mut self.pids_max,
            &mut self.stdout_max_bytes,
            &mut self.stderr_max_bytes,
            &mut self.wasm_memory_max_bytes,
            &mut self.fuel,
        ]
    }

    fn values(&self) -> [Option<u64>; 7] {
        let mut copy = *self;
        copy.fields_mut().map(|f| *f)
    }

    /// The limits a run gets when it asks for `self` under `ceiling` (`of` names the ceiling in
    /// a refusal: `policy "default"`): what it did not ask, the ceiling's; what it asked, when
    /// that is no looser than the ceiling and at least the least a jail is built with. Else
    /// refused: the first key asked wrong, with the ceiling or the floor.
    pub fn within(&self, ceiling: &Limits, of: &str) -> Result<Limits, LimitError> {
        let mut out = *ceiling;
        for (i, (asked, limit)) in self.values().into_iter().zip(ceiling.values()).enumerate() {
            let Some(a) = asked else { continue };
            let (key, floor) = (Self::KEYS[i], Self::FLOORS[i]);
            let refuse = |message: String| Err(LimitError { key, message });
            if a == 0 && floor <= 1 {
                return refuse("must be more than 0".into());
            }
            if a < floor {
                return refuse(format!("{a} is below {floor}, the least a jail is built with"));
            }
            if let Some(p) = limit
                && a > p
            {
                return refuse(format!("{a} is looser than {of}'s {p}: limits may only tighten it"));
            }
            *out.fields_mut()[i] = Some(a);
        }
        Ok(out)
    }

    /// Each limit the tighter of the two (a missing one is no limit). For a caller that already
    /// checked what it asks ([`Limits::within`]): a jail's gate takes no looser limit than it
    /// was built with, whoever opens it.
    pub fn tighter(&self, other: &Limits) -> Limits {
        let mut v = *self;
        for (mine, theirs) in v.fields_mut().into_iter().zip(other.values()) {
            *mine = match (*mine, theirs) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
        }
        v
    }

    /// Whether these limits need a jail built for them under `policy`: the ones a jail is built
    /// with (memory, processes, a guest's memory and fuel) differ from the policy's. A jail built
    /// ahead takes only the wall clock and the output caps at its start.
    pub fn need_own_jail(&self, policy: &Limits) -> bool {
        self.built_with() != policy.built_with()
    }

    /// The limits a jail holds from its build on.
    pub fn built_with(&self) -> [Option<u64>; 4] {
        [self.memory_max_bytes, self.pids_max, self.wasm_memory_max_bytes, self.fuel]
    }

    /// The wall-clock limit.
    pub fn wall_timeout(&self) -> Option<Duration> {
        self.wall_timeout_ms.map(Duration::from_millis)
    }

    /// `policy` with these limits in it (the ones set; a limit the policy has and these do not
    /// stays the policy's).
    pub fn applied_to(&self, policy: &Policy) -> Policy {
        let mut p = policy.clone();
        if let Some(w) = self.wall_timeout() {
            p.wall_timeout = w;
        }
        p.cgroups.memory_max_bytes = self.memory_max_bytes.or(p.cgroups.memory_max_bytes);
        p.cgroups.pids_max = self.pids_max.or(p.cgroups.pids_max);
        p.stdout_max_bytes = self.stdout_max_bytes.or(p.stdout_max_bytes);
        p.stderr_max_bytes = self.stderr_max_bytes.or(p.stderr_max_bytes);
        if let Some(m) = self.wasm_memory_max_bytes {
            p.wasm.memory_max_bytes = m;
        }
        p.wasm.fuel = self.fuel.or(p.wasm.fuel);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> Limits {
        Limits { wall_timeout_ms: Some(10_000), memory_max_bytes: Some(512 << 20), ..Limits::default() }
    }

    #[test]
    fn asked_limits_only_tighten_and_name_the_key() {
        let asked = Limits { wall_timeout_ms: Some(500), ..Limits::default() };
        let got = asked.within(&policy(), "policy \"default\"").expect("tighter");
        assert_eq!(got.wall_timeout_ms, Some(500));
        assert_eq!(got.memory_max_bytes, Some(512 << 20), "what was not asked is the ceiling's");
        let looser = Limits { memory_max_bytes: Some(1 << 30), ..Limits::default() };
        let e = looser.within(&policy(), "policy \"default\"").unwrap_err();
        assert_eq!(e.key, "memory-max-bytes");
        assert!(e.message.contains("looser than policy \"default\"'s 536870912"), "{}", e.message);
        let low = Limits { pids_max: Some(1), ..Limits::default() };
        assert_eq!(low.within(&policy(), "p").unwrap_err().key, "pids-max");
        let zero = Limits { fuel: Some(0), ..Limits::default() };
        assert_eq!(zero.within(&policy(), "p").unwrap_err().message, "must be more than 0");
        // A limit the ceiling does not have may be asked (above its floor).
        let pids = Limits { pids_max: Some(8), ..Limits::default() };
        assert_eq!(pids.within(&policy(), "p").expect("ok").pids_max, Some(8));
    }

    #[test]
    fn tighter_takes_the_smaller_of_each() {
        let a = Limits { wall_timeout_ms: Some(100), stdout_max_bytes: Some(9), ..Limits::default() };
        let t = a.tighter(&policy());
        assert_eq!(t.wall_timeout_ms, Some(100));
        assert_eq!(t.memory_max_bytes, Some(512 << 20));
        assert_eq!(t.stdout_max_bytes, Some(9));
        assert!(!t.need_own_jail(&policy()));
        assert!(Limits { fuel: Some(5), ..t }.need_own_jail(&policy()));
    }

    #[test]
    fn a_policy_round_trips_through_its_limits() {
        let p = Policy::builtin();
        let l = Limits::of(&p);
        assert_eq!(Limits::of(&l.applied_to(&p)), l);
        let tight = Limits { wall_timeout_ms: Some(7), pids_max: Some(3), ..l };
        let q = tight.applied_to(&p);
        assert_eq!(q.wall_timeout, Duration::from_millis(7));
        assert_eq!(q.cgroups.pids_max, Some(3));
    }
}
