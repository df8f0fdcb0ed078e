//! polytok: tokenizers with a Rust core.
//!
//! The pipeline of a byte-level BPE tokenizer, module by module:
//! - [`pretokenize`]: cut text into pieces (tiktoken's patterns, exactly);
//! - [`corpus`] and [`counting`]: read training text and count its pieces in
//!   parallel;
//! - [`bpe`]: the model, its trainer and its encoder;
//! - [`vocab`] and [`byte_alphabet`]: token ids, their bytes and printable
//!   names; [`trie`]: longest-prefix matching over tokens.
//!
//! The Python bindings live in one place, `python.rs`, behind the `python`
//! feature; everything else is plain Rust and tested with `cargo test`.

pub mod bpe;
pub mod byte_alphabet;
pub mod corpus;
pub mod counting;
pub mod error;
pub mod pretokenize;
pub mod progress;
pub mod trie;
pub mod vocab;

#[cfg(feature = "python")]
mod python;

pub use error::{Error, Result};
