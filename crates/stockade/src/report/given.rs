//! What a run's code gave back beside its output: the value of its last expression (as a
//! notebook cell's), and the figures it left open. The guest writes it as one JSON object on a
//! channel of its own ([`GIVEN_MAX_BYTES`] at most): `{"value": V}` or `{"repr": "..."}`, with
//! `"outputs": [{"type": "image/png", "base64": "..."}]` and `"left-out": "..."` (what its own
//! caps kept back). The supervisor trusts none of it: [`super::Report::give`] checks every part
//! against the caps here and says what it dropped.
//!
//! Imports (layers): none.

use base64::Engine as _;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The largest value, as JSON text, or repr, in bytes.
pub const VALUE_MAX_BYTES: usize = 16 * 1024;
/// The most outputs (figures) a run gives back.
pub const OUTPUTS_MAX: usize = 8;
/// The most bytes its outputs hold in all (decoded).
pub const OUTPUTS_MAX_BYTES: usize = 2 << 20;
/// The most a guest may write on its channel: the outputs in base64, a value in JSON, room to spare.
pub const GIVEN_MAX_BYTES: u64 = (OUTPUTS_MAX_BYTES as u64).div_ceil(3) * 4 + 8 * VALUE_MAX_BYTES as u64;

/// The types of output a run may give back.
const TYPES: &[(&str, &[u8])] = &[("image/png", b"\x89PNG\r\n\x1a\n")];

/// A file the code's run gave back: a figure it left open.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub struct GivenOutput {
    /// Its media type (`image/png`).
    #[serde(rename = "type")]
    pub kind: String,
    /// Its bytes, in base64.
    pub base64: String,
    /// Its size, decoded.
    pub bytes: u64,
}

/// The guest's word, as it wrote it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Said {
    #[serde(default)]
    value: Option<serde_json::Value>,
    #[serde(default)]
    repr: Option<String>,
    #[serde(default)]
    outputs: Vec<SaidOutput>,
    #[serde(default, rename = "left-out")]
    left_out: Option<String>,
}

#[derive(Deserialize)]
struct SaidOutput {
    #[serde(rename = "type")]
    kind: String,
    base64: String,
}

/// What was given, checked: its value or repr, its outputs, and what was dropped, in words.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Given {
    pub(super) value: Option<serde_json::Value>,
    pub(super) repr: Option<String>,
    pub(super) outputs: Vec<GivenOutput>,
    pub(super) notes: Vec<String>,
}

/// Reads a guest's channel (`bytes`, as it wrote them): nothing when it wrote nothing.
pub(super) fn read(bytes: &[u8]) -> Given {
    let mut given = Given::default();
    let text = bytes.trim_ascii();
    if text.is_empty() {
        return given;
    }
    if bytes.len() as u64 >= GIVEN_MAX_BYTES {
        given.notes.push(format!("the code's value and figures were left out: more than {GIVEN_MAX_BYTES} bytes"));
        return given;
    }
    let said: Said = match serde_json::from_slice(text) {
        Ok(s) => s,
        Err(e) => {
            given
                .notes
                .push(format!("the code's value and figures were left out: not as the runtime writes them ({e})"));
            return given;
        }
    };
    match (said.value, said.repr) {
        (Some(serde_json::Value::Null), None) | (None, None) => {}
        (Some(v), None) if serde_json::to_string(&v).map_or(usize::MAX, |t| t.len()) <= VALUE_MAX_BYTES => {
            given.value = Some(v);
        }
        (Some(_), None) => {
            given.notes.push(format!("the code's value was left out: over {VALUE_MAX_BYTES} bytes as JSON"))
        }
        (None, Some(r)) => {
            if r.len() > VALUE_MAX_BYTES {
                given.notes.push(format!("the code's value-repr was cut at {VALUE_MAX_BYTES} bytes"));
            }
            given.repr = Some(cut(r, VALUE_MAX_BYTES));
        }
        (Some(_), Some(_)) => given.notes.push("the code's value was left out: both a value and a repr".into()),
    }
    outputs(said.outputs, &mut given);
    if let Some(why) = said.left_out {
        given.notes.push(cut(why, 256));
    }
    given
}

/// The outputs said, each checked: a type of [`TYPES`], base64 of bytes that begin as that type
/// does, within [`OUTPUTS_MAX`] and [`OUTPUTS_MAX_BYTES`]; what is not is left out, said.
fn outputs(said: Vec<SaidOutput>, given: &mut Given) {
    let (mut total, mut over) = (0usize, 0usize);
    for o in said {
        let Some((_, signature)) = TYPES.iter().find(|(t, _)| *t == o.kind) else {
            given
                .notes
                .push(format!("an output of type {:?} was left out: only image/png is given back", cut(o.kind, 64)));
            continue;
        };
        let Ok(bytes) = base64::engine::general_purpose::STANDARD.decode(o.base64.as_bytes()) else {
            given.notes.push("an output was left out: not base64".into());
            continue;
        };
        if !bytes.starts_with(signature) {
            given.notes.push(format!("an output was left out: not {}", o.kind));
            continue;
        }
        if given.outputs.len() == OUTPUTS_MAX || total + bytes.len() > OUTPUTS_MAX_BYTES {
            over += 1;
            continue;
        }
        total += bytes.len();
        given.outputs.push(GivenOutput { kind: o.kind, base64: o.base64, bytes: bytes.len() as u64 });
    }
    if over > 0 {
        given.notes.push(format!(
            "{over} output(s) left out: at most {OUTPUTS_MAX} outputs and {OUTPUTS_MAX_BYTES} bytes in all are given back"
        ));
    }
}

/// `s` cut to at most `max` bytes, on a character boundary.
fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const PNG: &[u8] = b"\x89PNG\r\n\x1a\nrest";

    fn b64(b: &[u8]) -> String {
        base64::engine::general_purpose::STANDARD.encode(b)
    }

    #[test]
    fn a_value_a_repr_or_nothing() {
        assert_eq!(read(b"").value, None);
        assert_eq!(read(br#"{"value": [2, 4]}"#).value, Some(serde_json::json!([2, 4])));
        assert_eq!(read(br#"{"value": null}"#), Given::default());
        assert_eq!(read(br#"{"repr": "(1, 2)"}"#).repr.as_deref(), Some("(1, 2)"));
        let big = format!(r#"{{"value": "{}"}}"#, "x".repeat(VALUE_MAX_BYTES));
        let g = read(big.as_bytes());
        assert_eq!((g.value, g.notes.len()), (None, 1));
        let long = format!(r#"{{"repr": "{}é"}}"#, "x".repeat(VALUE_MAX_BYTES - 1));
        let g = read(long.as_bytes());
        assert_eq!(g.repr.map(|r| r.len()), Some(VALUE_MAX_BYTES - 1));
        assert!(read(b"{\"value\": 1, \"other\": 2}").notes[0].contains("not as the runtime writes them"));
        assert!(read(b"not json").notes[0].contains("left out"));
    }

    #[test]
    fn outputs_are_checked_and_capped() {
        let one = format!(r#"{{"type": "image/png", "base64": "{}"}}"#, b64(PNG));
        let g = read(format!(r#"{{"outputs": [{one}]}}"#).as_bytes());
        assert_eq!((g.outputs.len(), g.outputs[0].bytes), (1, PNG.len() as u64));
        let bad = format!(
            r#"{{"outputs": [{{"type": "text/html", "base64": ""}}, {{"type": "image/png", "base64": "{}"}}, {{"type": "image/png", "base64": "!!"}}]}}"#,
            b64(b"GIF89a")
        );
        let g = read(bad.as_bytes());
        assert_eq!((g.outputs.len(), g.notes.len()), (0, 3));
        let many = format!(r#"{{"outputs": [{}]}}"#, vec![one; OUTPUTS_MAX + 2].join(","));
        let g = read(many.as_bytes());
        assert_eq!(g.outputs.len(), OUTPUTS_MAX);
        assert!(g.notes[0].starts_with("2 output(s) left out"), "{:?}", g.notes);
    }
}
