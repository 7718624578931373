//! The enforcement records of the run report: each isolation layer's verdict ([`Enforcement`],
//! [`LayerReport`]) and the report's list of them ([`Layers`]), which may carry its JSON made
//! ahead and is serialized as it came. Re-exported from [`crate::report`], whose
//! [`Report`](super::Report) holds them. It imports only serde, schemars and serde_json; only its
//! tests use the parent's `Report`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Whether a layer held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum Enforcement {
    Enforced,
    Partial,
    NotEnforced,
}

/// One isolation layer: what the policy asked, what the kernel applied, and the verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case", deny_unknown_fields)]
pub struct LayerReport {
    pub layer: String,
    pub asked: String,
    pub applied: String,
    pub status: Enforcement,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl LayerReport {
    /// An enforced layer.
    pub fn new(layer: &str, asked: &str, applied: &str) -> Self {
        LayerReport {
            layer: layer.into(),
            asked: asked.into(),
            applied: applied.into(),
            status: Enforcement::Enforced,
            reason: None,
        }
    }

    /// Replaces the verdict and gives the reason.
    pub fn with_status(mut self, status: Enforcement, reason: &str) -> Self {
        self.status = status;
        self.reason = Some(reason.into());
        self
    }
}

/// A report's layers ([`LayerReport`]s, in jail order): a list that reads as a slice, and may
/// carry its JSON made ahead. A jail started ahead of its run encodes its layers while it waits
/// ([`Layers::encoded`]); a report passed between stockade's own processes carries them as that
/// JSON ([`Layers::take_json`], [`Layers::from_json`]). Serialized, layers with JSON are written
/// as it is (compact, and only through `serde_json`), without encoding the list again: they are
/// most of a report's bytes. [`Report::to_json`](super::Report::to_json) writes them from the list, pretty.
#[derive(Default)]
pub struct Layers {
    /// The list; decoded from `json` when first read, for layers made by [`Layers::from_json`].
    list: std::sync::OnceLock<Vec<LayerReport>>,
    /// The list's JSON, when it was made ahead or passed on.
    json: Option<Box<serde_json::value::RawValue>>,
}

impl Layers {
    /// Layers from a list.
    pub fn new(list: Vec<LayerReport>) -> Layers {
        Layers { list: std::sync::OnceLock::from(list), json: None }
    }

    /// Layers from a list, with its JSON made now.
    pub fn encoded(list: Vec<LayerReport>) -> Layers {
        let json = serde_json::value::to_raw_value(&list).ok();
        Layers { list: std::sync::OnceLock::from(list), json }
    }

    /// Layers from the JSON a [`Layers::take_json`] of stockade's own gave, decoded only when
    /// read and written out as it came. JSON that is not a list is dropped (no layer), and a
    /// list that is not one of layers reads as no layer.
    pub fn from_json(json: Box<serde_json::value::RawValue>) -> Layers {
        if !json.get().trim_start().starts_with('[') {
            return Layers::default();
        }
        Layers { list: std::sync::OnceLock::new(), json: Some(json) }
    }

    /// The layers' JSON (made now when it was not made ahead), leaving no layer behind; `None`,
    /// and the layers left as they were, when they cannot be encoded.
    pub fn take_json(&mut self) -> Option<Box<serde_json::value::RawValue>> {
        let json = match self.json.take() {
            Some(json) => json,
            None => serde_json::value::to_raw_value(self.as_slice()).ok()?,
        };
        *self = Layers::default();
        Some(json)
    }

    /// Whether the layers carry their JSON.
    pub fn has_json(&self) -> bool {
        self.json.is_some()
    }

    /// The layers.
    pub fn as_slice(&self) -> &[LayerReport] {
        self.list
            .get_or_init(|| self.json.as_deref().and_then(|j| serde_json::from_str(j.get()).ok()).unwrap_or_default())
    }
}

impl std::ops::Deref for Layers {
    type Target = [LayerReport];
    fn deref(&self) -> &[LayerReport] {
        self.as_slice()
    }
}

impl<'a> IntoIterator for &'a Layers {
    type Item = &'a LayerReport;
    type IntoIter = std::slice::Iter<'a, LayerReport>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

impl From<Vec<LayerReport>> for Layers {
    fn from(list: Vec<LayerReport>) -> Layers {
        Layers::new(list)
    }
}

impl Clone for Layers {
    fn clone(&self) -> Layers {
        Layers { list: self.list.clone(), json: self.json.clone() }
    }
}

impl std::fmt::Debug for Layers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl PartialEq for Layers {
    fn eq(&self, other: &Layers) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Serialize for Layers {
    /// The JSON as it is, when the layers carry it; else the list.
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match &self.json {
            Some(json) => json.serialize(serializer),
            None => self.as_slice().serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for Layers {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Layers, D::Error> {
        Vec::<LayerReport>::deserialize(deserializer).map(Layers::new)
    }
}

/// The schema of the list, inline as a `Vec`'s is.
impl JsonSchema for Layers {
    fn inline_schema() -> bool {
        Vec::<LayerReport>::inline_schema()
    }
    fn schema_name() -> std::borrow::Cow<'static, str> {
        Vec::<LayerReport>::schema_name()
    }
    fn schema_id() -> std::borrow::Cow<'static, str> {
        Vec::<LayerReport>::schema_id()
    }
    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        Vec::<LayerReport>::json_schema(generator)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Report;

    #[test]
    fn layers_passed_on_as_json_are_written_as_they_came_and_read_the_same() {
        let list = vec![
            LayerReport::new("namespace.user", "new", "new"),
            LayerReport::new("seccomp", "deny \"net\"", "1 filter").with_status(Enforcement::Partial, "why"),
        ];
        let mut made = Layers::encoded(list.clone());
        let json = made.take_json().expect("encoded");
        assert!(made.is_empty(), "taken: {made:?}");
        let argv = ["x".to_string()];
        let mut r = Report::new("builtin:default", "x", &argv, std::time::Duration::from_secs(1));
        r.enforcement = Layers::from_json(json.clone());
        // Compact: the layers exactly as they came, in the report's place for them.
        let compact = serde_json::to_string(&r).expect("serializes");
        assert!(compact.ends_with(&format!("\"enforcement\":{}}}", json.get())), "{compact}");
        // Pretty, and read back: the same layers as the list.
        let back = Report::from_json(&r.to_json()).expect("parses");
        assert_eq!(back.enforcement.as_slice(), list.as_slice());
        assert!(r.to_json().contains("\n    {\n      \"layer\": \"namespace.user\""), "{}", r.to_json());
        assert_eq!(Layers::from_json(json).as_slice(), list.as_slice());
        // Made without JSON: taken, it is encoded then.
        let mut plain = Layers::new(list.clone());
        let json = plain.take_json().expect("encoded now");
        assert_eq!(serde_json::from_str::<Vec<LayerReport>>(json.get()).expect("a list"), list);
        // JSON that is not a list of layers reads as none; JSON that is not a list is dropped.
        let odd = serde_json::value::RawValue::from_string("[{\"x\": 1}]".into()).expect("json");
        assert!(Layers::from_json(odd).is_empty());
        let odd = serde_json::value::RawValue::from_string("{\"x\": 1}".into()).expect("json");
        assert_eq!(serde_json::to_string(&Layers::from_json(odd)).expect("serializes"), "[]");
        // Made ahead, the JSON is what is written, compact; `to_json` is pretty all the same.
        r.enforcement = Layers::encoded(list.clone());
        let compact = serde_json::to_string(&r).expect("serializes");
        assert!(compact.ends_with("\"status\":\"partial\",\"reason\":\"why\"}]}"), "{compact}");
        assert!(r.to_json().contains("\n    {\n      \"layer\": \"namespace.user\""), "{}", r.to_json());
    }
}
