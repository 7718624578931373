//! Policies: `PolicyFile` (TOML, serde) -> `Policy` (validated). Nothing here touches the host
//! beyond reading the policy file.
//!
//! Imports (layers): `input`.

pub mod egress;
mod file;
mod limits;
mod validate;

pub use egress::{EgressHost, EgressRule};
pub use file::{
    CgroupsFile, EnvironmentFile, FilesystemFile, IdentityFile, LandlockFile, Limit, LimitsFile, Namespaces,
    NetworkFile, OrderedStrings, OutputFile, OverCap, PolicyFile, ProcMode, ProcessFile, RlimitKey, RlimitsFile,
    SeccompFile, StdinMode, SyscallGroup,
};
pub use limits::{LimitError, Limits};
pub use validate::{
    CgroupPolicy, Filesystem, Grant, Identity, LandlockPolicy, MAX_WALL_TIMEOUT_MS, MEMORY_MAX_FLOOR, NetworkPolicy,
    PIDS_MAX_FLOOR, Policy, Problem, SeccompPolicy, WASM_MEMORY_FLOOR, check_grant_path, check_inside_path,
    check_wall_timeout_ms,
};

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The shipped default policy, embedded in the binary.
pub const DEFAULT_POLICY_TOML: &str = include_str!("../../../../policies/default.toml");

/// The policies shipped with stockade, embedded in the binary, by name: a server names them in
/// its configuration and requests (a policy directory may add others, or replace these).
pub const SHIPPED: [(&str, &str); 3] = [
    ("default", DEFAULT_POLICY_TOML),
    ("wrap-python", include_str!("../../../../policies/examples/wrap-python.toml")),
    ("wrap-node", include_str!("../../../../policies/examples/wrap-node.toml")),
];

/// The example policies shipped in `policies/examples/`, by name, with what each is for
/// (`stockade policy example NAME` prints one).
pub const EXAMPLES: [(&str, &str, &str); 3] = [
    (
        "wrap-python",
        "the host's python3 and its packages (numpy, multiprocessing): stockade run --policy wrap-python.toml -- /usr/bin/python3 ...",
        include_str!("../../../../policies/examples/wrap-python.toml"),
    ),
    (
        "wrap-node",
        "the host's node and its packages: stockade run --policy wrap-node.toml -- /usr/bin/node ...",
        include_str!("../../../../policies/examples/wrap-node.toml"),
    ),
    (
        "wide-open",
        "every wall off: a reference for policy score and diff, never for running untrusted code",
        include_str!("../../../../policies/examples/wide-open.toml"),
    ),
];

/// The largest policy file stockade reads (the shipped ones are a few KiB).
pub const MAX_POLICY_BYTES: u64 = 1 << 20;

/// Reads a policy file's text: a regular file of at most [`MAX_POLICY_BYTES`].
pub fn read_file(path: &Path) -> Result<String, PolicyError> {
    Ok(crate::input::read_text(path, MAX_POLICY_BYTES, "a policy")?)
}

/// The name the embedded default policy goes by in messages and reports.
pub const DEFAULT_POLICY_NAME: &str = "builtin:default";

/// A policy that could not be read or is not valid.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    /// The file could not be read (missing, not a regular file, larger than [`MAX_POLICY_BYTES`]).
    #[error(transparent)]
    Read(#[from] crate::input::InputError),
    /// The file was read but is not a valid policy; every problem found is listed.
    #[error("{}", DisplayList(problems))]
    Invalid { problems: Vec<LocatedProblem> },
    /// A value given on the command line or through the API is not valid.
    #[error("{flag}: {message}")]
    Override { flag: String, message: String },
}

/// A problem with its place: `file:line:col: key: message`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocatedProblem {
    pub file: String,
    /// 1-based line and column, when the key is in the file.
    pub position: Option<(usize, usize)>,
    /// The key path, e.g. `limits.wall-timeout-ms` or `filesystem.read-only[2]`.
    pub key: String,
    pub message: String,
}

impl fmt::Display for LocatedProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, col)) = self.position {
            write!(f, ":{line}:{col}")?;
        }
        if self.key.is_empty() {
            write!(f, ": {}", self.message)
        } else {
            write!(f, ": {}: {}", self.key, self.message)
        }
    }
}

struct DisplayList<'a>(&'a [LocatedProblem]);

impl fmt::Display for DisplayList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

impl Policy {
    /// The shipped default policy (`policies/default.toml`, embedded at build time).
    ///
    /// Built from the typed defaults rather than by parsing the embedded TOML (a unit test checks
    /// the two are the same policy), which keeps a one-shot `stockade run` fast.
    pub fn builtin() -> Policy {
        match validate::validate(PolicyFile::strict_default(), DEFAULT_POLICY_NAME) {
            Ok(p) => p,
            // Checked by a unit test; reaching this is a build defect.
            Err(problems) => unreachable!("the built-in default policy is invalid: {problems:?}"),
        }
    }

    /// Reads and validates a policy file.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        Policy::from_toml(&read_file(path)?, &path.display().to_string())
    }

    /// Parses and validates policy text; `name` is used in messages (usually the file path).
    pub fn from_toml(text: &str, name: &str) -> Result<Policy, PolicyError> {
        let (mut problems, file) = parse(text, name);
        if let Some(file) = file {
            match validate::validate(file, name) {
                Ok(policy) if problems.is_empty() => return Ok(policy),
                Ok(_) => {}
                Err(found) => problems.extend(found.into_iter().map(|p| LocatedProblem {
                    file: name.to_string(),
                    position: locate(text, &p.key, false),
                    key: p.key,
                    message: p.message,
                })),
            }
        }
        // In the file's order.
        problems.sort_by_key(|p| p.position.unwrap_or((usize::MAX, 0)));
        Err(PolicyError::Invalid { problems })
    }

    /// Grants a host path read-only (and executable) at the same path inside; `flag` names the
    /// source in messages (`--ro`).
    pub fn add_read_only(&mut self, path: &str, flag: &str) -> Result<(), PolicyError> {
        self.add_grant(path, false, flag)
    }

    /// Grants a host path writable at the same path inside; `flag` names the source (`--rw`).
    pub fn add_read_write(&mut self, path: &str, flag: &str) -> Result<(), PolicyError> {
        self.add_grant(path, true, flag)
    }

    fn add_grant(&mut self, path: &str, writable: bool, flag: &str) -> Result<(), PolicyError> {
        // Relative paths on the command line are relative to the caller's working directory.
        let absolute = if Path::new(path).is_absolute() {
            path.to_string()
        } else {
            let cwd = std::env::current_dir()
                .map_err(|e| PolicyError::Override { flag: flag.into(), message: e.to_string() })?;
            cwd.join(path).display().to_string()
        };
        let path = check_grant_path(&absolute)
            .map_err(|message| PolicyError::Override { flag: format!("{flag} {path}"), message })?;
        self.filesystem.grants.push(Grant { path, writable, optional: false, empty: false, origin: flag.to_string() });
        Ok(())
    }

    /// Gives the run an empty writable directory of its own at `path` inside (under the writable
    /// quota, nothing on the host): a Wasm run's `/app`, a service run's work directory.
    pub fn add_empty_dir(&mut self, path: &str, flag: &str) -> Result<(), PolicyError> {
        let path = check_grant_path(path)
            .map_err(|message| PolicyError::Override { flag: format!("{flag} {path}"), message })?;
        self.filesystem.grants.push(Grant { path, writable: true, optional: false, empty: true, origin: flag.into() });
        Ok(())
    }

    /// Sets the wall-clock limit.
    pub fn set_wall_timeout(&mut self, timeout: Duration, flag: &str) -> Result<(), PolicyError> {
        // Below a millisecond is zero here, as in the file's unit.
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.wall_timeout = check_wall_timeout_ms(ms)
            .map_err(|message| PolicyError::Override { flag: flag.into(), message })?
            .max(timeout);
        Ok(())
    }

    /// Sets the parent cgroup of the run's cgroups (a path as in /proc/self/cgroup).
    pub fn set_cgroup_parent(&mut self, parent: &str, flag: &str) -> Result<(), PolicyError> {
        check_inside_path(parent).map_err(|message| PolicyError::Override { flag: flag.into(), message })?;
        self.cgroups.parent = Some(parent.to_string());
        Ok(())
    }

    /// Adds a host to the egress allow-list for this run (`--egress HOST:PORT`), checked as the
    /// file's entries are, with what the list needs of the rest of the policy.
    pub fn add_egress(&mut self, entry: &str, flag: &str) -> Result<(), PolicyError> {
        let bad = |message: String| PolicyError::Override { flag: format!("{flag} {entry}"), message };
        let rule: EgressRule = entry.parse().map_err(bad)?;
        if let Some((key, why)) = validate::egress_conflicts(&self.namespaces, &self.seccomp.allow).into_iter().next() {
            return Err(bad(format!("the policy's {key}: {why}")));
        }
        if self.network.egress_allow.len() >= egress::MAX_EGRESS_RULES {
            return Err(bad(format!("the list holds {} hosts already", egress::MAX_EGRESS_RULES)));
        }
        if !self.network.egress_allow.contains(&rule) {
            self.network.egress_allow.push(rule);
        }
        Ok(())
    }

    /// Sets the working directory inside the jail.
    pub fn set_cwd(&mut self, cwd: &str, flag: &str) -> Result<(), PolicyError> {
        check_inside_path(cwd).map_err(|message| PolicyError::Override { flag: flag.into(), message })?;
        self.filesystem.cwd = PathBuf::from(cwd);
        Ok(())
    }
}

fn parse(text: &str, name: &str) -> (Vec<LocatedProblem>, Option<PolicyFile>) {
    parse_toml(text, name)
}

/// TOML -> a typed file (a policy, a server configuration). Every structural problem (unknown
/// key, wrong type) is collected: the offending key is set aside and the rest parsed again, so
/// the semantic checks still see every other key. Returns the problems so far and, when the rest
/// parsed, the file.
pub fn parse_toml<T: serde::de::DeserializeOwned>(text: &str, name: &str) -> (Vec<LocatedProblem>, Option<T>) {
    let problem = |position: Option<(usize, usize)>, key: String, message: String| LocatedProblem {
        file: name.to_string(),
        position,
        key,
        message,
    };
    let mut table: toml::Table = match toml::Deserializer::parse(text).and_then(|_| text.parse::<toml::Table>()) {
        Ok(t) => t,
        Err(e) => {
            let position = e.span().map(|s| line_col(text, s.start));
            return (vec![problem(position, String::new(), first_line(e.message()))], None);
        }
    };
    let mut problems = Vec::new();
    // Each round sets one key aside; a file has far fewer keys than this.
    for _ in 0..256 {
        let e = match serde_path_to_error::deserialize::<_, T>(toml::Value::Table(table.clone())) {
            Ok(file) => return (problems, Some(file)),
            Err(e) => e,
        };
        let path = e.path().to_string();
        let mut key = if path == "." { String::new() } else { path };
        let message = first_line(&e.inner().to_string());
        let mut at_key = false;
        // An unknown key in a map-typed table: the path stops at the table; name the key itself.
        if let Some(name) = message.strip_prefix("unknown field `").and_then(|m| m.split('`').next()) {
            at_key = true;
            if !key.ends_with(name) {
                key = if key.is_empty() { name.to_string() } else { format!("{key}.{name}") };
            }
        }
        let position = locate(text, &key, at_key).or_else(|| locate(text, &key, !at_key));
        problems.push(problem(position, key.clone(), message));
        if key.is_empty() || !remove_key(&mut table, &key) {
            break;
        }
    }
    (problems, None)
}

/// Removes a key path (`a.b[2]` removes `a.b`) from a table; false when it is not there.
fn remove_key(table: &mut toml::Table, key: &str) -> bool {
    let parts: Vec<&str> = key.split('.').map(|p| p.split('[').next().unwrap_or(p)).collect();
    let Some((last, parents)) = parts.split_last() else { return false };
    let mut t = table;
    for p in parents {
        match t.get_mut(*p) {
            Some(toml::Value::Table(inner)) => t = inner,
            _ => return false,
        }
    }
    t.remove(*last).is_some()
}

fn first_line(message: &str) -> String {
    message.lines().next().unwrap_or("").trim().to_string()
}

/// 1-based (line, column) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(before.chars().count(), |i| before[i + 1..].chars().count()) + 1;
    (line, col)
}

/// The JSON Schema of policy files (version 1), for editors: every key with its type, default
/// and documentation.
pub fn json_schema() -> String {
    let mut schema = schemars::schema_for!(PolicyFile);
    schema.insert("title".into(), "stockade policy, version 1".into());
    serde_json::to_string_pretty(&schema).unwrap_or_default()
}

/// Where the value of `key` (a path like `seccomp.allow[1]`) is written in `text`: 1-based
/// line and column, as `stockade policy check` reports problems.
pub fn locate_key(text: &str, key: &str) -> Option<(usize, usize)> {
    locate(text, key, false)
}

/// Finds a key path (`a.b[2].c`) in TOML text: the (line, column) of its value, or of the key
/// itself with `at_key`.
fn locate(text: &str, key: &str, at_key: bool) -> Option<(usize, usize)> {
    use toml::de::{DeTable, DeValue};
    if key.is_empty() {
        return None;
    }
    let root = DeTable::parse(text).ok()?;
    let mut table: &DeTable<'_> = root.get_ref();
    let mut span = None;
    let mut current: Option<&DeValue<'_>> = None;
    for part in key.split('.') {
        let (name, index) = match part.find('[') {
            Some(i) => (&part[..i], part[i + 1..].trim_end_matches(']').parse::<usize>().ok()),
            None => (part, None),
        };
        if let Some(DeValue::Table(t)) = current {
            table = t;
        }
        let (k, value) = table.iter().find(|(k, _)| k.get_ref().as_ref() == name)?;
        span = Some(if at_key { k.span() } else { value.span() });
        current = Some(value.get_ref());
        if let (Some(i), Some(DeValue::Array(items))) = (index, current) {
            let item = items.get(i)?;
            span = Some(item.span());
            current = Some(item.get_ref());
        }
    }
    span.map(|s| line_col(text, s.start))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_default_is_valid_and_strict() {
        let p = Policy::from_toml(DEFAULT_POLICY_TOML, DEFAULT_POLICY_NAME).expect("default policy");
        let ns = p.namespaces;
        assert!(ns.user && ns.pid && ns.mount && ns.net && ns.ipc && ns.uts && ns.cgroup);
        assert_ne!(p.identity.host_uid, 0);
        assert!(p.filesystem.grants.iter().all(|g| !g.writable));
        assert_eq!(p.rlimits.first(), Some(&(RlimitKey::CoreBytes, Limit::Value(0))));
    }

    #[test]
    fn builtin_is_exactly_the_shipped_default_toml() {
        let parsed = Policy::from_toml(DEFAULT_POLICY_TOML, DEFAULT_POLICY_NAME).expect("default.toml");
        assert_eq!(parsed, Policy::builtin());
    }

    /// Every key the format has is spelled out in default.toml, so a reader sees them all.
    #[test]
    fn the_shipped_default_toml_spells_out_every_key() {
        fn keys(prefix: &str, t: &toml::Table, out: &mut Vec<String>) {
            for (k, v) in t {
                let path = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                match v {
                    toml::Value::Table(inner) if prefix.is_empty() => keys(&path, inner, out),
                    _ => out.push(path),
                }
            }
        }
        let all = toml::Table::try_from(file::PolicyFile::strict_default()).expect("serialize");
        let shipped: toml::Table = DEFAULT_POLICY_TOML.parse().expect("parse");
        let (mut want, mut have) = (Vec::new(), Vec::new());
        keys("", &all, &mut want);
        keys("", &shipped, &mut have);
        let missing: Vec<&String> = want.iter().filter(|k| !have.contains(k)).collect();
        assert!(missing.is_empty(), "policies/default.toml lacks {missing:?}");
    }

    #[test]
    fn omitted_keys_take_the_default_file_values() {
        let minimal = Policy::from_toml("version = 1\n", "min.toml").expect("minimal");
        let default = Policy::builtin();
        assert_eq!(Policy { origin: default.origin.clone(), ..minimal }, default);
    }

    #[test]
    fn rlimit_key_list_matches_the_enum() {
        let names: Vec<&str> = RlimitKey::ALL.iter().map(|k| k.key()).collect();
        assert_eq!(names, file::RLIMIT_KEYS);
        assert_eq!(
            problems("version = 1\n[rlimits]\ncore = 0\n")[0],
            "p.toml:3:1: rlimits.core: unknown field `core`, expected one of `address-space-bytes`, `core-bytes`, \
             `cpu-seconds`, `data-bytes`, `file-size-bytes`, `locked-memory-bytes`, `message-queue-bytes`, \
             `nice-ceiling`, `max-open-files`, `max-processes`, `realtime-priority`, `realtime-timeout-us`, \
             `max-pending-signals`, `stack-bytes`"
        );
    }

    #[test]
    fn rlimits_keep_document_order() {
        let p = Policy::from_toml("version = 1\n[rlimits]\nstack-bytes = 1\ncore-bytes = 0\nmax-open-files = 9\n", "x")
            .expect("valid");
        let keys: Vec<_> = p.rlimits.iter().map(|(k, _)| *k).collect();
        assert_eq!(keys, [RlimitKey::StackBytes, RlimitKey::CoreBytes, RlimitKey::MaxOpenFiles]);
    }

    fn problems(text: &str) -> Vec<String> {
        match Policy::from_toml(text, "p.toml") {
            Ok(_) => panic!("expected an error for {text:?}"),
            Err(PolicyError::Invalid { problems }) => problems.iter().map(ToString::to_string).collect(),
            Err(e) => panic!("unexpected error kind: {e}"),
        }
    }

    #[test]
    fn errors_name_file_line_and_key() {
        assert_eq!(
            problems("version = 1\n[limits]\nwall-timeout-ms = 0\n"),
            ["p.toml:3:19: limits.wall-timeout-ms: must be > 0"]
        );
        let unknown = problems("version = 1\n[limits]\nwall-timeout = 5\n");
        assert_eq!(unknown.len(), 1);
        assert_eq!(
            unknown[0],
            "p.toml:3:1: limits.wall-timeout: unknown field `wall-timeout`, expected `wall-timeout-ms`"
        );
        let wrong_type = problems("version = 1\n[limits]\nwall-timeout-ms = \"1s\"\n");
        assert!(
            wrong_type[0].starts_with("p.toml:3:19: limits.wall-timeout-ms: invalid type: string \"1s\""),
            "{wrong_type:?}"
        );
        assert_eq!(
            problems("version = 2\n"),
            ["p.toml:1:11: version: unsupported version 2 (this stockade reads version 1)"]
        );
        assert!(problems("version = \n")[0].starts_with("p.toml:1:"));
        assert!(problems("[limits]\n")[0].contains("missing field `version`"));
    }

    #[test]
    fn all_problems_are_reported_at_once() {
        let all = problems(
            "version = 1\n[identity]\nhost-uid = 0\n[filesystem]\nread-only = [\"/usr\", \"rel\", \"/proc/1\"]\n\
             [limits]\nwall-timeout-ms = 0\n[rlimits]\nmax-open-files = 1\n",
        );
        assert_eq!(all.len(), 5, "{all:?}");
        assert!(all[0].starts_with("p.toml:3:12: identity.host-uid: must not be 0"));
        assert!(all[1].starts_with("p.toml:5:22: filesystem.read-only[1]: \"rel\" must be an absolute path"));
        assert!(all[2].contains("filesystem.read-only[2]: \"/proc/1\" is inside /proc"));
        assert!(all[3].contains("limits.wall-timeout-ms: must be > 0"));
        assert!(all[4].contains("rlimits.max-open-files: must be between 4"));
    }

    #[test]
    fn grant_paths_are_checked() {
        assert!(check_grant_path("/").is_err());
        assert!(check_grant_path("/usr/../etc").is_err());
        assert!(check_grant_path("/sys/fs").is_err());
        assert!(check_grant_path("/device").is_ok());
        assert_eq!(check_grant_path("/usr//lib/").expect("ok"), PathBuf::from("/usr/lib"));
    }

    #[test]
    fn overrides_are_checked() {
        let mut p = Policy::builtin();
        assert!(p.add_read_only("/proc", "--ro").is_err());
        assert!(p.set_wall_timeout(Duration::ZERO, "--timeout").is_err());
        p.add_read_write("/srv/work", "--rw").expect("valid");
        assert!(p.filesystem.grants.last().is_some_and(|g| g.writable && g.origin == "--rw"));
    }
}

/// A front's cgroup flags (`--cgroup-parent`, `--cgroups-best-effort`), over a policy's
/// `[cgroups]`: the same for `stockade run` and for every policy a server offers.
#[derive(Debug, Clone, Default)]
pub struct CgroupFlags {
    /// The cgroup under which each run's cgroup is made (`cgroups.parent`).
    pub parent: Option<String>,
    /// Run without the cgroup limits this host cannot give (`cgroups.best-effort = true`).
    pub best_effort: bool,
}

impl CgroupFlags {
    /// Applies the flags to a policy.
    pub fn apply(&self, policy: &mut Policy) -> Result<(), PolicyError> {
        if let Some(parent) = &self.parent {
            policy.set_cgroup_parent(parent, "--cgroup-parent")?;
        }
        if self.best_effort {
            policy.cgroups.best_effort = true;
        }
        Ok(())
    }
}
