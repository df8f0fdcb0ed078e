//! Pre-tokenizers: cut normalized text into the pieces a model encodes.
