//! `GET /metrics`: the server's counters in the Prometheus text format (OpenMetrics), with the
//! `prometheus-client` crate.
//!
//! Imports (layers): none.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RunLabels {
    runtime: String,
    status: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct LatencyLabels {
    runtime: String,
    /// Whether a warm jail served the run.
    warm: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RuntimeLabel {
    runtime: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

/// The server's metrics.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    runs: Family<RunLabels, Counter>,
    latency: Family<LatencyLabels, Histogram>,
    queue_depth: Gauge,
    running: Gauge,
    warm_ready: Family<RuntimeLabel, Gauge>,
    warm_target: Family<RuntimeLabel, Gauge>,
    warm_died: Family<RuntimeLabel, Counter>,
    refusals: Family<ReasonLabel, Counter>,
    egress_refusals: Family<ReasonLabel, Counter>,
    egress_connections: Counter,
    setup_failures: Family<RuntimeLabel, Counter>,
    sessions_open: Gauge,
    sessions_created: Counter,
    sessions_ended: Family<ReasonLabel, Counter>,
    sessions_restarted: Counter,
    hibernations: Family<ReasonLabel, Counter>,
    resumes: Family<ReasonLabel, Counter>,
    batch_runs: Family<RunLabels, Counter>,
}

fn latency_histogram() -> Histogram {
    // 0.5 ms to about 33 s.
    Histogram::new(exponential_buckets(0.0005, 2.0, 17))
}

impl Default for Metrics {
    fn default() -> Metrics {
        Metrics::new()
    }
}

impl Metrics {
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("stockade");
        let runs = Family::<RunLabels, Counter>::default();
        registry.register("runs", "Runs finished, by runtime and report status", runs.clone());
        let latency = Family::<LatencyLabels, Histogram>::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register(
            "run_latency_seconds",
            "From the request's arrival to its report, by runtime and whether a warm jail served it",
            latency.clone(),
        );
        let queue_depth = Gauge::default();
        registry.register("queue_depth", "Requests waiting for a free run slot", queue_depth.clone());
        let batch_runs = Family::<RunLabels, Counter>::default();
        registry.register("batch_runs", "Runs of batches ended, by runtime and status", batch_runs.clone());
        let running = Gauge::default();
        registry.register("running", "Runs in progress", running.clone());
        let warm_ready = Family::<RuntimeLabel, Gauge>::default();
        registry.register("warm_ready", "Warm jails waiting, by runtime", warm_ready.clone());
        let warm_target = Family::<RuntimeLabel, Gauge>::default();
        registry.register("warm_target", "Warm jails wanted, by runtime", warm_target.clone());
        let warm_died = Family::<RuntimeLabel, Counter>::default();
        registry.register("warm_died", "Warm jails that ended before a run came", warm_died.clone());
        let refusals = Family::<ReasonLabel, Counter>::default();
        registry.register("refusals", "Requests refused, by reason", refusals.clone());
        let egress_refusals = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "egress_refusals",
            "Connections the runs' egress proxies refused, by reason (not-listed, private-address, cannot-resolve, \
             cannot-connect, max-connections, bad-request, busy)",
            egress_refusals.clone(),
        );
        let egress_connections = Counter::default();
        registry.register(
            "egress_connections",
            "Connections the runs' egress proxies opened",
            egress_connections.clone(),
        );
        let setup_failures = Family::<RuntimeLabel, Counter>::default();
        registry.register(
            "jail_setup_failures",
            "Jails that could not be built or whose setup failed inside",
            setup_failures.clone(),
        );
        let sessions_open = Gauge::default();
        registry.register("sessions_open", "Sessions open", sessions_open.clone());
        let sessions_created = Counter::default();
        registry.register("sessions_created", "Sessions made", sessions_created.clone());
        let sessions_restarted = Counter::default();
        registry.register(
            "sessions_restarted",
            "Live sessions' interpreters taken down in a run (its wall limit, a memory limit, its own exit)",
            sessions_restarted.clone(),
        );
        let sessions_ended = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "sessions_ended",
            "Sessions ended, by what ended them (idle-timeout, max-lifetime, deleted)",
            sessions_ended.clone(),
        );
        let hibernations = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "session_hibernations",
            "Live interpreters written to the state directory, by why (asked, idle, drain, fork, room: another resumed)",
            hibernations.clone(),
        );
        let resumes = Family::<ReasonLabel, Counter>::default();
        registry.register(
            "session_resumes",
            "Hibernated interpreters' next runs, by outcome (resumed, or why their image was refused)",
            resumes.clone(),
        );
        Metrics {
            registry,
            hibernations,
            resumes,
            sessions_open,
            sessions_created,
            sessions_ended,
            sessions_restarted,
            runs,
            batch_runs,
            latency,
            queue_depth,
            running,
            warm_ready,
            warm_target,
            warm_died,
            refusals,
            egress_refusals,
            egress_connections,
            setup_failures,
        }
    }

    /// What a run's egress proxy opened and refused.
    pub fn egress(&self, report: &stockade::Report) {
        let Some(e) = &report.egress else { return };
        self.egress_connections.inc_by(e.allowed);
        for c in e.connections.iter().filter_map(|c| c.refused) {
            self.egress_refusals.get_or_create(&ReasonLabel { reason: c.name().into() }).inc();
        }
    }

    pub fn run_done(&self, runtime: &str, status: &str, warm: bool, seconds: f64) {
        self.runs.get_or_create(&RunLabels { runtime: runtime.into(), status: status.into() }).inc();
        let labels = LatencyLabels { runtime: runtime.into(), warm: warm.to_string() };
        self.latency.get_or_create(&labels).observe(seconds);
    }

    /// A batch's run ended with `status`.
    pub fn batch_run(&self, runtime: &str, status: &str) {
        self.batch_runs.get_or_create(&RunLabels { runtime: runtime.into(), status: status.into() }).inc();
    }

    pub fn queued(&self, delta: i64) {
        self.queue_depth.inc_by(delta);
    }

    pub fn running(&self, delta: i64) {
        self.running.inc_by(delta);
    }

    pub fn warm_fill(&self, runtime: &str, n: usize) {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        self.warm_ready.get_or_create(&RuntimeLabel { runtime: runtime.into() }).set(n);
    }

    pub fn warm_target(&self, runtime: &str, n: usize) {
        let n = i64::try_from(n).unwrap_or(i64::MAX);
        self.warm_target.get_or_create(&RuntimeLabel { runtime: runtime.into() }).set(n);
    }

    pub fn warm_died(&self, runtime: &str, n: usize) {
        self.warm_died.get_or_create(&RuntimeLabel { runtime: runtime.into() }).inc_by(n as u64);
    }

    pub fn refused(&self, reason: &str) {
        self.refusals.get_or_create(&ReasonLabel { reason: reason.into() }).inc();
    }

    pub fn setup_failed(&self, runtime: &str) {
        self.setup_failures.get_or_create(&RuntimeLabel { runtime: runtime.into() }).inc();
    }

    pub fn session_opened(&self, open: usize) {
        self.sessions_created.inc();
        self.sessions_open.set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    /// The sessions a server found on its state directory as it started.
    pub fn sessions_open(&self, open: usize) {
        self.sessions_open.set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    pub fn session_ended(&self, why: &str, open: usize) {
        self.sessions_ended.get_or_create(&ReasonLabel { reason: why.into() }).inc();
        self.sessions_open.set(i64::try_from(open).unwrap_or(i64::MAX));
    }

    pub fn session_hibernated(&self, why: &str) {
        self.hibernations.get_or_create(&ReasonLabel { reason: why.into() }).inc();
    }

    pub fn session_resumed(&self, outcome: &str) {
        self.resumes.get_or_create(&ReasonLabel { reason: outcome.into() }).inc();
    }

    pub fn session_restarted(&self) {
        self.sessions_restarted.inc();
    }

    /// The text exposition.
    pub fn encode(&self) -> String {
        let mut out = String::new();
        let _ = prometheus_client::encoding::text::encode(&mut out, &self.registry);
        out
    }
}
