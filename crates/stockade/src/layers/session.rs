//! Session hygiene: a new session without a controlling terminal (no TIOCSTI into the caller's
//! tty, no SIGINT/SIGHUP from it) and a fresh anonymous session keyring (the caller's keys are
//! out of reach).

use crate::layers::LayerReport;
use crate::sys::{self, Errno};

/// Which step failed, for the failure message.
pub const STEP_SETSID: u32 = 0;
pub const STEP_KEYRING: u32 = 1;

/// Child side.
pub fn apply() -> Result<(), (u32, Errno)> {
    sys::setsid().map_err(|e| (STEP_SETSID, e))?;
    sys::join_new_session_keyring().map_err(|e| (STEP_KEYRING, e))?;
    Ok(())
}

pub fn report() -> LayerReport {
    let what = "new session, no controlling terminal; new session keyring";
    LayerReport::new("session", what, what)
}
