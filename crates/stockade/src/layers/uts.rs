//! Hostname inside the run's uts namespace.

use crate::layers::{Enforcement, LayerReport};
use crate::policy::Policy;
use crate::sys::{self, Errno};

/// The hostname to set, or None when the uts namespace is off (the host's name is shown then).
#[derive(Debug, Clone)]
pub struct UtsPlan {
    hostname: Option<Vec<u8>>,
    asked: String,
}

pub fn prepare(policy: &Policy) -> UtsPlan {
    UtsPlan {
        hostname: policy.namespaces.uts.then(|| policy.hostname.clone().into_bytes()),
        asked: policy.hostname.clone(),
    }
}

/// Child side: sets hostname and clears the NIS domain name.
pub fn apply(plan: &UtsPlan) -> Result<(), Errno> {
    if let Some(name) = &plan.hostname {
        sys::sethostname(name)?;
        sys::setdomainname(b"(none)")?;
    }
    Ok(())
}

impl UtsPlan {
    pub fn report(&self) -> LayerReport {
        match self.hostname {
            Some(_) => LayerReport::new("hostname", &self.asked, &self.asked),
            None => LayerReport::new("hostname", &self.asked, "host's")
                .with_status(Enforcement::NotEnforced, "namespaces.uts = false: the program sees the host's name"),
        }
    }
}
