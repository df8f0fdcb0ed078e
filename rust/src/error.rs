//! The one error type of the crate. Every failure a user can cause (bad
//! arguments, bad corpus bytes, a damaged tokenizer file) is a value of this
//! type, never a panic; the PyO3 layer maps each variant to a Python exception.

use std::path::PathBuf;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A caller-supplied setting or argument is out of range or malformed.
    #[error("{0}")]
    InvalidArgument(String),

    /// The training corpus cannot be used (bad UTF-8, empty, ...).
    #[error("{0}")]
    Corpus(String),

    /// A tokenizer file (polytok JSON, tiktoken ranks) is truncated or damaged.
    #[error("{0}")]
    TokenizerFile(String),

    /// A token id that the vocabulary does not hold.
    #[error("unknown token id {id} (the vocabulary has ids 0..{vocab_size})")]
    UnknownTokenId { id: u32, vocab_size: usize },

    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The progress callback asked to stop (Ctrl-C in Python).
    #[error("interrupted")]
    Interrupted,
}

impl Error {
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
