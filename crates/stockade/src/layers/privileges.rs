//! Privileges: after the namespace and mount work, the process keeps no capability at all and
//! can never gain one.
//!
//! Bounding set emptied one capability at a time, ambient set cleared, securebits locked (no
//! root semantics, no setuid fixups, no keep-caps, no ambient raise), effective/permitted/
//! inheritable cleared with `capset`, and `no_new_privs` set (also what Landlock and seccomp need
//! without `CAP_SYS_ADMIN`). The ids were switched earlier (see `identity`).

use crate::layers::LayerReport;
use crate::sys::{self, Errno};

/// Step numbers for failure messages.
pub const STEP_BOUNDING: u32 = 0;
pub const STEP_AMBIENT: u32 = 1;
pub const STEP_SECUREBITS: u32 = 2;
pub const STEP_CAPSET: u32 = 3;
pub const STEP_NO_NEW_PRIVS: u32 = 4;

/// Every securebit set and locked, except KEEP_CAPS (locked off).
const SECUREBITS: libc::c_ulong = (libc::SECBIT_NOROOT
    | libc::SECBIT_NOROOT_LOCKED
    | libc::SECBIT_NO_SETUID_FIXUP
    | libc::SECBIT_NO_SETUID_FIXUP_LOCKED
    | libc::SECBIT_KEEP_CAPS_LOCKED
    | libc::SECBIT_NO_CAP_AMBIENT_RAISE
    | libc::SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED) as libc::c_ulong;

#[derive(Debug, Clone, Copy)]
pub struct PrivPlan {
    /// The highest capability number this kernel knows (`/proc/sys/kernel/cap_last_cap`).
    last_cap: u32,
}

/// Reads the kernel's highest capability number (63 if it cannot be read: dropping unknown
/// capabilities fails with EINVAL, which `apply` tolerates above the known ones).
pub fn prepare() -> PrivPlan {
    let last_cap =
        std::fs::read_to_string("/proc/sys/kernel/cap_last_cap").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(63);
    PrivPlan { last_cap }
}

/// Child side.
pub fn apply(plan: &PrivPlan) -> Result<(), (u32, Errno)> {
    for cap in 0..=plan.last_cap {
        match sys::drop_bounding_cap(cap) {
            Ok(()) => {}
            Err(Errno(libc::EINVAL)) if cap > 40 => break,
            Err(e) => return Err((STEP_BOUNDING, e)),
        }
    }
    sys::clear_ambient_caps().map_err(|e| (STEP_AMBIENT, e))?;
    sys::set_securebits(SECUREBITS).map_err(|e| (STEP_SECUREBITS, e))?;
    sys::clear_caps().map_err(|e| (STEP_CAPSET, e))?;
    sys::set_no_new_privs().map_err(|e| (STEP_NO_NEW_PRIVS, e))
}

/// Words for a failed step.
pub fn step_name(step: u32) -> &'static str {
    match step {
        STEP_BOUNDING => "drop the bounding set",
        STEP_AMBIENT => "clear ambient capabilities",
        STEP_SECUREBITS => "lock securebits",
        STEP_CAPSET => "clear capabilities (capset)",
        _ => "set no_new_privs",
    }
}

impl PrivPlan {
    pub fn report(&self) -> LayerReport {
        let what = format!(
            "no capabilities (bounding set 0-{} dropped, ambient, inheritable, permitted, effective empty), \
             securebits locked, no_new_privs",
            self.last_cap
        );
        LayerReport::new("privileges", &what, &what)
    }
}
