//! `network.egress-allow`: the hosts a jail may reach through its supervisor's proxy, each a
//! host and a port. A host is a name (`pypi.org`), a wildcard (`*.pythonhosted.org`: any name
//! below the domain, not the domain itself) or an IP address (`127.0.0.1`, `[::1]`). A name never
//! matches an address and an address is reached only where it is written as one: a listed name
//! that resolves into loopback, private, link-local or other non-public ranges is refused unless
//! that address is listed too, with the same port.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The most entries `network.egress-allow` may hold.
pub const MAX_EGRESS_RULES: usize = 256;
/// The longest host name (RFC 1035, without the final dot).
const MAX_NAME_LEN: usize = 253;

/// One host of the allow-list.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EgressHost {
    /// Exactly this name (lowercase, no final dot).
    Name(String),
    /// Any name below this domain (lowercase), the domain itself not.
    Below(String),
    /// This address, written as one.
    Ip(IpAddr),
}

/// One entry of `network.egress-allow`: a host and a port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EgressRule {
    pub host: EgressHost,
    pub port: u16,
}

impl fmt::Display for EgressRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.host {
            EgressHost::Name(n) => write!(f, "{n}:{}", self.port),
            EgressHost::Below(d) => write!(f, "*.{d}:{}", self.port),
            EgressHost::Ip(IpAddr::V4(a)) => write!(f, "{a}:{}", self.port),
            EgressHost::Ip(IpAddr::V6(a)) => write!(f, "[{a}]:{}", self.port),
        }
    }
}

/// A host as a client named it (a proxy request's target): an address, or a name checked and
/// lowercased.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    Name(String),
    Ip(IpAddr),
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Name(n) => f.write_str(n),
            Target::Ip(a) => write!(f, "{a}"),
        }
    }
}

/// Splits `HOST:PORT` (`[v6]:PORT` for an IPv6 address) into its host and port.
pub fn split_host_port(s: &str) -> Result<(&str, u16), String> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (h, p) = rest.split_once(']').ok_or("an IPv6 address needs its closing ']'")?;
        (h, p.strip_prefix(':').ok_or("needs :PORT after the host")?)
    } else {
        s.rsplit_once(':').ok_or("needs :PORT after the host (443 for https, 80 for http)")?
    };
    let port: u16 = port.parse().map_err(|_| format!("{port:?} is not a port (1-65535)"))?;
    if port == 0 {
        return Err("port 0 is not a port (1-65535)".into());
    }
    if host.is_empty() {
        return Err("needs a host before :PORT".into());
    }
    Ok((host, port))
}

/// A host name as DNS has them: labels of letters, digits and inner hyphens (an underscore
/// allowed, as some services name hosts), 1-63 bytes each, at most 253 in all; the last label
/// not all digits (that would be an address in another spelling, `127.1`). Lowercased, one final
/// dot dropped.
pub fn check_name(name: &str) -> Result<String, String> {
    let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
    if name.is_empty() || name.len() > MAX_NAME_LEN {
        return Err(format!("a host name is 1-{MAX_NAME_LEN} bytes"));
    }
    for label in name.split('.') {
        let ok = (1..=63).contains(&label.len())
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return Err(format!("{name:?} is not a host name (labels of letters, digits and inner hyphens)"));
        }
    }
    let numeric = |l: &str| {
        l.bytes().all(|b| b.is_ascii_digit())
            || l.strip_prefix("0x").is_some_and(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    if name.rsplit('.').next().is_some_and(numeric) {
        return Err(format!("{name:?} is an address in another spelling, not a name: write it as an IP"));
    }
    Ok(name)
}

/// A client's host: an IP address (IPv4 in dotted quads only, IPv6 without brackets) or a name.
pub fn target(host: &str) -> Result<Target, String> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(Target::Ip(canonical(ip)));
    }
    check_name(host).map(Target::Name)
}

/// An IPv4 address written as IPv6 (`::ffff:a.b.c.d`) is the IPv4 address.
pub fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

impl std::str::FromStr for EgressRule {
    type Err = String;

    fn from_str(s: &str) -> Result<EgressRule, String> {
        let (host, port) = split_host_port(s.trim())?;
        let host = if let Some(domain) = host.strip_prefix("*.") {
            EgressHost::Below(check_name(domain)?)
        } else if host.contains('*') {
            return Err("a wildcard is only `*.` before a domain (`*.example.org`)".into());
        } else {
            match target(host)? {
                Target::Ip(ip) if ip.is_unspecified() => {
                    return Err(format!("{ip} is no host (the unspecified address)"));
                }
                Target::Ip(ip) => EgressHost::Ip(ip),
                Target::Name(n) => EgressHost::Name(n),
            }
        };
        Ok(EgressRule { host, port })
    }
}

impl EgressRule {
    /// Whether this entry names `target` at `port`: a name by its name (or a wildcard's
    /// domain), an address only by an address entry.
    pub fn names(&self, target: &Target, port: u16) -> bool {
        if port != self.port {
            return false;
        }
        match (&self.host, target) {
            (EgressHost::Name(n), Target::Name(t)) => n == t,
            (EgressHost::Below(d), Target::Name(t)) => {
                t.len() > d.len() + 1 && t.ends_with(d.as_str()) && t.as_bytes()[t.len() - d.len() - 1] == b'.'
            }
            (EgressHost::Ip(a), Target::Ip(t)) => a == t,
            _ => false,
        }
    }
}

impl EgressRule {
    /// Whether this entry allows everything `narrower` does (a request's list within a policy's):
    /// the same port, and the same host, or a name or domain below this one's `*.domain`.
    pub fn covers(&self, narrower: &EgressRule) -> bool {
        if self.port != narrower.port {
            return false;
        }
        match (&self.host, &narrower.host) {
            (a, b) if a == b => true,
            (EgressHost::Below(_), EgressHost::Name(n)) => self.names(&Target::Name(n.clone()), self.port),
            (EgressHost::Below(_), EgressHost::Below(d)) => self.names(&Target::Name(d.clone()), self.port),
            _ => false,
        }
    }
}

/// Whether an address is one the internet routes to everyone: not loopback, private (RFC 1918,
/// unique-local), link-local, shared (CGNAT), unspecified, multicast, broadcast, documentation,
/// benchmarking, reserved, or an IPv4 address inside IPv6 (mapped, NAT64, 6to4) that is not.
pub fn is_public(ip: IpAddr) -> bool {
    match canonical(ip) {
        IpAddr::V4(a) => public_v4(a),
        IpAddr::V6(a) => public_v6(a),
    }
}

fn public_v4(a: Ipv4Addr) -> bool {
    let [o0, o1, o2, _] = a.octets();
    !(a.is_unspecified()
        || a.is_loopback()
        || a.is_private()
        || a.is_link_local()
        || a.is_broadcast()
        || a.is_documentation()
        || a.is_multicast()
        || o0 == 0
        || (o0 == 100 && (o1 & 0xc0) == 64)
        || (o0 == 192 && o1 == 0 && o2 == 0)
        || (o0 == 198 && (o1 & 0xfe) == 18)
        || o0 >= 240)
}

fn public_v6(a: Ipv6Addr) -> bool {
    let s = a.segments();
    let embedded_v4 = |hi: u16, lo: u16| {
        let ([a, b], [c, d]) = (hi.to_be_bytes(), lo.to_be_bytes());
        Ipv4Addr::new(a, b, c, d)
    };
    if s[0] == 0x64 && s[1] == 0xff9b {
        // NAT64: reaches the IPv4 address inside it.
        return public_v4(embedded_v4(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        // 6to4: the IPv4 address in its second and third segments.
        return public_v4(embedded_v4(s[1], s[2]));
    }
    !(a.is_unspecified()
        || a.is_loopback()
        || a.is_multicast()
        || (s[0] & 0xfe00) == 0xfc00
        || (s[0] & 0xffc0) == 0xfe80
        || (s[0] & 0xffc0) == 0xfec0
        || (s[0] == 0x2001 && s[1] == 0x0db8)
        || (s[0] == 0x2001 && s[1] < 0x200)
        || s[..6] == [0, 0, 0, 0, 0, 0])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(s: &str) -> EgressRule {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn entries_read_as_written_and_print_back() {
        for s in ["pypi.org:443", "*.pythonhosted.org:443", "127.0.0.1:8080", "[::1]:80", "files_1.example:22"] {
            assert_eq!(rule(s).to_string(), s);
        }
        assert_eq!(rule("PyPI.org.:443").to_string(), "pypi.org:443");
        assert_eq!(rule("[::ffff:10.0.0.1]:80").to_string(), "10.0.0.1:80");
        for bad in [
            "pypi.org",
            "pypi.org:0",
            "pypi.org:65536",
            ":443",
            "*:443",
            "a.*.org:443",
            "-a.org:443",
            "127.1:80",
            "0x7f000001:80",
            "0.0.0.0:80",
            "[::1:80",
            "a..b:1",
            "ex ample.org:1",
        ] {
            assert!(bad.parse::<EgressRule>().is_err(), "{bad} was taken");
        }
    }

    #[test]
    fn names_match_names_and_addresses_addresses() {
        let t = |h: &str| target(h).expect("target");
        assert!(rule("pypi.org:443").names(&t("PYPI.org"), 443));
        assert!(!rule("pypi.org:443").names(&t("pypi.org"), 80));
        assert!(!rule("pypi.org:443").names(&t("evilpypi.org"), 443));
        let below = rule("*.pythonhosted.org:443");
        assert!(below.names(&t("files.pythonhosted.org"), 443));
        assert!(below.names(&t("a.b.pythonhosted.org"), 443));
        assert!(!below.names(&t("pythonhosted.org"), 443));
        assert!(!below.names(&t("xpythonhosted.org"), 443));
        assert!(rule("127.0.0.1:80").names(&t("127.0.0.1"), 80));
        assert!(rule("127.0.0.1:80").names(&t("::ffff:127.0.0.1"), 80));
        assert!(!rule("127.0.0.1:80").names(&t("localhost"), 80));
        assert!(!rule("localhost:80").names(&t("127.0.0.1"), 80));
    }

    #[test]
    fn a_list_covers_only_what_is_within_it() {
        let wide = rule("*.example.org:443");
        assert!(wide.covers(&rule("a.example.org:443")));
        assert!(wide.covers(&rule("*.b.example.org:443")));
        assert!(wide.covers(&rule("*.example.org:443")));
        assert!(!wide.covers(&rule("example.org:443")));
        assert!(!wide.covers(&rule("a.example.org:80")));
        assert!(!wide.covers(&rule("*.org:443")));
        assert!(!rule("a.example.org:443").covers(&rule("*.a.example.org:443")));
        assert!(rule("10.0.0.1:80").covers(&rule("10.0.0.1:80")));
        assert!(!rule("10.0.0.1:80").covers(&rule("10.0.0.2:80")));
    }

    #[test]
    fn only_public_addresses_are_public() {
        for a in ["1.1.1.1", "151.101.0.223", "2a04:4e42::223", "64:ff9b::808:808"] {
            assert!(is_public(a.parse().expect("ip")), "{a}");
        }
        for a in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.1.2.3",
            "224.0.0.1",
            "255.255.255.255",
            "198.18.0.1",
            "240.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a00:1",
            "2002:a00:1::",
            "2001:db8::1",
            "ff02::1",
        ] {
            assert!(!is_public(a.parse().expect("ip")), "{a}");
        }
    }
}
