//! Byte-level BPE: the model (a vocabulary of byte strings whose ids are
//! their merge ranks, as in tiktoken), its trainer and its encoder.
//!
//! Encoding semantics are tiktoken's: a piece starts as its bytes; while two
//! adjacent parts concatenate to a token, the pair whose token has the lowest
//! id (rank) is merged, the leftmost on ties. A trained model records which
//! pair made each token (its merges), for formats that need them.

mod affixes;
mod backtrack;
mod cuts;
mod encoder;
pub mod files;
mod pair_table;
pub mod parity;
mod piece_cache;
mod reach;
mod short_merge;
mod short_pieces;
mod trainer;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

pub(crate) use encoder::EncodeState;
pub(crate) use piece_cache::{PieceCache, CACHED_PIECE};
pub(crate) use short_pieces::PieceBatch;
pub use trainer::{train, train_characters, TrainerSettings};

use crate::error::{Error, Result};
use crate::huge_pages::HugeTable;
use crate::text::pattern::{Pattern, PreTokenizer};
use crate::vocab::{SpecialTokens, Vocab};

pub struct BpeModel {
    vocab: Vocab,
    /// `(left id, right id)` -> the id of their concatenation, for the
    /// pairs BPE merges (`pair_table.rs`).
    pairs: pair_table::PairTable,
    /// The same for two single bytes, as a dense 256 x 256 table (first
    /// byte * 256 + second byte): every merge of a piece starts with these
    /// lookups, and this table stays in cache where the pair table does not.
    byte_pairs: Box<[u32]>,
    /// The same for two tokens both below `LOW_IDS`, as a dense grid: after
    /// the first merges of a piece, most pairs still join low ids (ids are
    /// ranks, and the first merges make the commonest tokens), and one load
    /// from this grid costs a fraction of a probe of the pair table.
    /// On huge pages (`huge_pages.rs`).
    low_pairs: HugeTable<u32>,
    /// The grid's side is `1 << low_bits` (`LOW_IDS`, or less for a small
    /// vocabulary).
    low_bits: u32,
    byte_ids: [u32; 256],
    /// Where long pieces can be cut into independent parts.
    cuts: cuts::CutFilter,
    /// The pre-tokenizer pattern the model was trained with (the preset's
    /// pre-tokenizer; the model itself encodes pieces, not text).
    pattern: Pattern,
    /// Special tokens: ids beyond the ordinary tokens, with their text (as
    /// tiktoken's models have them). The pipeline finds them in text.
    special: SpecialTokens,
    /// The pair that made each merged token, when the model was trained here.
    merges: Option<Vec<(u32, u32)>>,
    /// The id of rank 0, as the pipeline sees it (`Model`): 0, or the
    /// number of ids a file reserves before the ranks (Tekken's 1,000
    /// special ids). Inside the model every id is a rank.
    first_id: u32,
    /// Which tokens merging can make, and whether merges follow ranks.
    reach: reach::Reach,
    /// The encoder of long pieces, built on first use (loading stays fast);
    /// `None` when the merges are not in rank order.
    backtracker: OnceLock<Option<backtrack::Backtracker>>,
    /// The short tokens by inline key, built on first use (training makes
    /// models it never encodes with).
    token_index: OnceLock<short_pieces::TokenIndex>,
    /// Unique per model object: tells the per-thread encoding caches apart.
    /// Replaced by `clear_cache`, which makes every thread's cache stale.
    instance: AtomicU64,
}

/// The largest side of `BpeModel::low_pairs`: 1024 x 1024 ids of 4 bytes,
/// 4 MB (measured a little faster than 512 x 512 on a first pass).
const LOW_IDS: usize = 1024;

/// Source of `BpeModel::instance`.
static INSTANCES: AtomicU64 = AtomicU64::new(1);

pub(crate) fn new_instance() -> u64 {
    INSTANCES.fetch_add(1, Ordering::Relaxed)
}

impl BpeModel {
    /// A model from its tokens in rank order. Every single byte must be a
    /// token, so that any input can be encoded.
    pub fn new(
        tokens: Vec<Vec<u8>>,
        pattern: Pattern,
        special: Vec<(String, u32)>,
        merges: Option<Vec<(u32, u32)>>,
    ) -> Result<Self> {
        let max_tokens = short_merge::MAX_RANKS.min(pair_table::MAX_IDS);
        if tokens.len() > max_tokens {
            return Err(Error::invalid(format!(
                "a BPE vocabulary must hold at most {max_tokens} tokens; this one has {}",
                tokens.len()
            )));
        }
        let vocab = Vocab::new(tokens)?;
        let mut byte_ids = [0u32; 256];
        for b in 0..=255u8 {
            byte_ids[b as usize] = vocab.id(&[b]).ok_or_else(|| {
                Error::invalid(format!(
                    "the vocabulary lacks the single-byte token 0x{b:02X}"
                ))
            })?;
        }
        let special = SpecialTokens::new(special, vocab.len())?;
        PreTokenizer::new(pattern.clone())?; // a bad pattern is refused here, named
        if let Some(merges) = &merges {
            check_merges(&vocab, merges)?;
        }
        let pairs = token_pairs(&vocab, &affixes::Affixes::new(&vocab));
        let mut byte_pairs = vec![encoder::NO_RANK; 256 * 256].into_boxed_slice();
        let low_bits = vocab
            .len()
            .next_power_of_two()
            .min(LOW_IDS)
            .trailing_zeros();
        let mut low_pairs = HugeTable::filled(1 << (2 * low_bits), encoder::NO_RANK);
        for &(left, right, id) in &pairs {
            if let ([first], [second]) = (vocab.bytes(left), vocab.bytes(right)) {
                byte_pairs[*first as usize * 256 + *second as usize] = id;
            }
            if (left | right) >> low_bits == 0 {
                low_pairs[(left << low_bits | right) as usize] = id;
            }
        }
        let cuts = cuts::CutFilter::new(vocab.iter());
        let mut model = BpeModel {
            vocab,
            pairs: pair_table::PairTable::new(&pairs),
            byte_pairs,
            low_pairs,
            low_bits,
            byte_ids,
            cuts,
            pattern,
            special,
            merges,
            first_id: 0,
            reach: reach::Reach::unknown(),
            backtracker: OnceLock::new(),
            token_index: OnceLock::new(),
            instance: AtomicU64::new(new_instance()),
        };
        drop(pairs); // before `reach` works, which allocates on every core
        model.reach = reach::Reach::new(&model);
        // Only the merges BPE makes, once they are known (`pair_table.rs`).
        if let Some(splits) = model.reach.splits() {
            let last_merges: Vec<(u32, u32, u32)> = splits
                .iter()
                .zip(0..)
                .filter(|&(&(left, _), id)| left != id)
                .map(|(&(left, right), id)| (left, right, id))
                .collect();
            model.pairs = pair_table::PairTable::new(&last_merges);
        }
        Ok(model)
    }

    /// The linear-time encoder of huge pieces, if the vocabulary allows it.
    fn backtracker(&self) -> Option<&backtrack::Backtracker> {
        self.backtracker
            .get_or_init(|| {
                let splits = self.reach.splits()?;
                Some(backtrack::Backtracker::new(self, splits))
            })
            .as_ref()
    }

    fn token_index(&self) -> &short_pieces::TokenIndex {
        self.token_index
            .get_or_init(|| short_pieces::TokenIndex::new(&self.vocab))
    }

    /// Forgets the pieces cached by encoding (on every thread), e.g. to
    /// time encoding from a cold start or to free memory.
    pub fn clear_cache(&self) {
        self.instance.store(new_instance(), Ordering::Relaxed);
    }

    pub fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    pub fn special_tokens(&self) -> &SpecialTokens {
        &self.special
    }

    pub fn pattern(&self) -> &Pattern {
        &self.pattern
    }

    pub fn merges(&self) -> Option<&[(u32, u32)]> {
        self.merges.as_deref()
    }

    /// The model with its ids starting at `first_id` (see the field).
    pub fn with_first_id(mut self, first_id: u32) -> Result<Self> {
        if first_id as u64 + self.vocab_size() as u64 >= 1 << 31 {
            return Err(Error::invalid(format!(
                "the first id {first_id} puts ids beyond 2^31"
            )));
        }
        self.first_id = first_id;
        Ok(self)
    }

    /// The id of rank 0 (see the field).
    pub fn first_id(&self) -> u32 {
        self.first_id
    }

    /// The model with `merges` recorded as the pairs that made its last
    /// tokens, if that is what they are (else it records none).
    pub fn with_merges(mut self, merges: Vec<(u32, u32)>) -> Self {
        if check_merges(&self.vocab, &merges).is_ok() {
            self.merges = Some(merges);
        }
        self
    }

    /// The merges that make each token BPE can make, one per token (the
    /// last merge of BPE on the token's own bytes), in id order; `None`
    /// when the ids do not follow the merges (see `reach.rs`). These are
    /// the merges of Hugging Face's BPE that encodes as this model does.
    pub fn merge_list(&self) -> Option<Vec<(u32, u32)>> {
        let splits = self.reach.splits()?;
        Some(
            splits
                .iter()
                .enumerate()
                .filter(|&(id, &(left, right))| (left, right) != (id as u32, id as u32))
                .map(|(_, &pair)| pair)
                .collect(),
        )
    }

    /// The tokens no merge makes (given only for a piece that is exactly
    /// their bytes).
    pub fn unreachable_tokens(&self) -> impl Iterator<Item = u32> + '_ {
        (0..self.vocab.len() as u32).filter(|&id| !self.reach.is_reachable(id))
    }

    /// Ordinary tokens plus special tokens, i.e. one past the largest id.
    pub fn vocab_size(&self) -> usize {
        self.vocab.len().max(self.special.end_id() as usize)
    }

    /// The bytes of a token, special or not.
    pub fn token_bytes(&self, id: u32) -> Result<&[u8]> {
        if (id as usize) < self.vocab.len() {
            Ok(self.vocab.bytes(id))
        } else if let Some(text) = self.special.text(id) {
            Ok(text.as_bytes())
        } else {
            Err(Error::UnknownTokenId {
                id,
                vocab_size: self.vocab_size(),
            })
        }
    }

    /// The id of a token given by its bytes (special tokens by their text).
    pub fn token_id(&self, bytes: &[u8]) -> Option<u32> {
        self.vocab.id(bytes).or_else(|| {
            std::str::from_utf8(bytes)
                .ok()
                .and_then(|text| self.special.id(text))
        })
    }

    pub fn decode_bytes(&self, ids: &[u32]) -> Result<Vec<u8>> {
        let mut out = Vec::with_capacity(ids.len() * 4);
        for &id in ids {
            out.extend_from_slice(self.token_bytes(id)?);
        }
        Ok(out)
    }
}

/// Every pair of tokens whose concatenation is a token, with that token's
/// id: `(left, right, id)`, each pair once (a concatenation is one token).
/// Merging by these pairs is merging by the rank of the concatenated bytes,
/// since every part during encoding is a token. O(total bytes) with
/// `affixes`, however long the tokens.
fn token_pairs(vocab: &Vocab, affixes: &affixes::Affixes) -> Vec<(u32, u32, u32)> {
    let mut pairs = Vec::new();
    // The prefix tokens of one token, `(length, id)` by length.
    let mut prefixes = Vec::new();
    for (id, bytes) in vocab.iter().enumerate() {
        prefixes.clear();
        affixes.for_each_prefix(vocab, bytes, |len, left| prefixes.push((len, left)));
        if prefixes.is_empty() {
            continue;
        }
        affixes.for_each_suffix(vocab, bytes, |len, right| {
            let split = bytes.len() - len;
            if let Ok(i) = prefixes.binary_search_by_key(&split, |&(len, _)| len) {
                pairs.push((prefixes[i].1, right, id as u32));
            }
        });
    }
    pairs
}

fn check_merges(vocab: &Vocab, merges: &[(u32, u32)]) -> Result<()> {
    if merges.len() + 256 > vocab.len() {
        return Err(Error::invalid(format!(
            "{} merges cannot make {} tokens beyond the 256 bytes",
            merges.len(),
            vocab.len().saturating_sub(256)
        )));
    }
    let first_merged = vocab.len() - merges.len();
    for (i, &(left, right)) in merges.iter().enumerate() {
        let id = (first_merged + i) as u32;
        let valid = left < id && right < id && {
            let (l, r) = (vocab.bytes(left), vocab.bytes(right));
            let merged = vocab.bytes(id);
            merged.len() == l.len() + r.len() && merged.starts_with(l) && merged.ends_with(r)
        };
        if !valid {
            return Err(Error::invalid(format!(
                "merge {i} ({left}, {right}) does not make token {id}"
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
