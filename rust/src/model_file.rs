//! What every polytok JSON tokenizer file shares: its header (`"format":
//! "polytok"`, a version, the model) and how a damaged file is reported.

use crate::error::{Error, Result};

/// The version of polytok's JSON files that this polytok reads and writes.
pub const FORMAT_VERSION: u32 = 1;

/// The model a polytok JSON file holds (`"bpe"`, `"wordpiece"`,
/// `"unigram"`), or `None` if the text is not such a file. The rest of the
/// document is only scanned, not built: cheap next to loading it.
pub fn model_of(json: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Header {
        model: String,
    }
    serde_json::from_str::<Header>(json).ok().map(|h| h.model)
}

/// The error of a file that cannot be used, naming it.
pub fn damaged(source: &str, what: impl std::fmt::Display) -> Error {
    Error::TokenizerFile(format!("{source}: {what}"))
}

/// Checks a file's header: polytok's format, this version, the `expected`
/// model.
pub fn check_header(
    source: &str,
    format: &str,
    version: u32,
    model: &str,
    expected: &str,
) -> Result<()> {
    if format != "polytok" {
        return Err(damaged(
            source,
            format!("format is {format:?}, expected \"polytok\""),
        ));
    }
    if version != FORMAT_VERSION {
        return Err(damaged(
            source,
            format!(
                "format version {version} is not supported (this polytok reads version {FORMAT_VERSION})"
            ),
        ));
    }
    if model != expected {
        return Err(damaged(
            source,
            format!("model is {model:?}, expected {expected:?}"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_of_a_file() {
        let json = r#"{"format": "polytok", "version": 1, "model": "unigram", "pieces": [["a", -1.0, "normal"]]}"#;
        assert_eq!(model_of(json).as_deref(), Some("unigram"));
        assert_eq!(model_of(r#"{"format": "polytok"}"#), None);
        assert_eq!(model_of("not json"), None);
        assert_eq!(model_of("[1, 2]"), None);
    }
}
