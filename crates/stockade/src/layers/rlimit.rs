//! Resource limits (setrlimit), soft = hard, in the order the policy wrote them.

use crate::layers::LayerReport;
use crate::policy::{Limit, Policy, RlimitKey};
use crate::sys::{self, Errno};

#[derive(Debug, thiserror::Error)]
pub enum RlimitError {
    #[error(
        "rlimits.{key}: {value} is above the caller's hard limit {hard}; a jailed process cannot raise it \
         (raise the caller's limit, e.g. `ulimit -H`, or lower the policy value)"
    )]
    AboveHard { key: &'static str, value: String, hard: u64 },
    #[error("rlimits.{key}: cannot read the caller's limit: {errno}")]
    Read { key: &'static str, errno: Errno },
}

#[derive(Debug, Clone)]
pub struct RlimitPlan {
    items: Vec<(libc::c_int, u64)>,
    keys: Vec<(RlimitKey, Limit)>,
}

/// The kernel resource number for a policy key.
pub fn resource(key: RlimitKey) -> libc::c_int {
    (match key {
        RlimitKey::AddressSpaceBytes => libc::RLIMIT_AS,
        RlimitKey::CoreBytes => libc::RLIMIT_CORE,
        RlimitKey::CpuSeconds => libc::RLIMIT_CPU,
        RlimitKey::DataBytes => libc::RLIMIT_DATA,
        RlimitKey::FileSizeBytes => libc::RLIMIT_FSIZE,
        RlimitKey::LockedMemoryBytes => libc::RLIMIT_MEMLOCK,
        RlimitKey::MessageQueueBytes => libc::RLIMIT_MSGQUEUE,
        RlimitKey::NiceCeiling => libc::RLIMIT_NICE,
        RlimitKey::MaxOpenFiles => libc::RLIMIT_NOFILE,
        RlimitKey::MaxProcesses => libc::RLIMIT_NPROC,
        RlimitKey::RealtimePriority => libc::RLIMIT_RTPRIO,
        RlimitKey::RealtimeTimeoutUs => libc::RLIMIT_RTTIME,
        RlimitKey::MaxPendingSignals => libc::RLIMIT_SIGPENDING,
        RlimitKey::StackBytes => libc::RLIMIT_STACK,
    }) as libc::c_int
}

/// Checks each limit against the caller's hard limit: inside a user namespace no process can
/// raise a hard limit, so a higher value would fail in the child; say so before starting.
pub fn prepare(policy: &Policy) -> Result<RlimitPlan, RlimitError> {
    let can_raise = !policy.namespaces.user && sys::geteuid() == 0;
    let mut items = Vec::with_capacity(policy.rlimits.len());
    for &(key, limit) in &policy.rlimits {
        let res = resource(key);
        let value = match limit {
            Limit::Value(v) => v,
            Limit::Unlimited => libc::RLIM_INFINITY,
        };
        let (_, hard) = sys::getrlimit(res).map_err(|errno| RlimitError::Read { key: key.key(), errno })?;
        if value > hard && !can_raise {
            let value = match limit {
                Limit::Value(v) => v.to_string(),
                Limit::Unlimited => "unlimited".into(),
            };
            return Err(RlimitError::AboveHard { key: key.key(), value, hard });
        }
        items.push((res, value));
    }
    Ok(RlimitPlan { items, keys: policy.rlimits.clone() })
}

/// Child side. On failure returns the index of the limit and the errno.
pub fn apply(plan: &RlimitPlan) -> Result<(), (u32, Errno)> {
    for (i, &(res, value)) in plan.items.iter().enumerate() {
        sys::setrlimit(res, value, value).map_err(|e| (u32::try_from(i).unwrap_or(u32::MAX), e))?;
    }
    Ok(())
}

impl RlimitPlan {
    /// The policy key of the limit at `index`, for failure messages.
    pub fn key_at(&self, index: u32) -> &'static str {
        self.keys.get(index as usize).map_or("?", |(k, _)| k.key())
    }

    pub fn report(&self) -> LayerReport {
        let list = if self.keys.is_empty() {
            "none (the caller's limits are inherited)".to_string()
        } else {
            self.keys
                .iter()
                .map(|(k, v)| match v {
                    Limit::Value(n) => format!("{}={n}", k.key()),
                    Limit::Unlimited => format!("{}=unlimited", k.key()),
                })
                .collect::<Vec<_>>()
                .join(", ")
        };
        LayerReport::new("rlimits", &list, &list)
    }
}
