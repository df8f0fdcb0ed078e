//! What every polytok JSON tokenizer file shares: its header (`"format":
//! "polytok"`, a version, the model) and how a damaged file is reported.

use crate::error::{Error, Result};

/// The version of polytok's JSON files that this polytok reads and writes.
pub const FORMAT_VERSION: u32 = 1;

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
