//! Linear-time BPE for long pieces, by backtracking (the idea of the `bpe`
//! crate of github/rust-gems).
//!
//! Instead of simulating the merges, build the output left to right: at each
//! position take the longest token that starts there, and keep it if BPE
//! would leave it next to the previous token (`is_valid_pair`); otherwise try
//! the next shorter token that starts there, and when none fits, take the
//! previous token back and try a shorter one in its place. A position from
//! which no valid continuation exists is remembered as a dead end, so each
//! position is given up at most once: O(n) token steps, each a walk down two
//! merge trees, and memory accessed in text order (the heap merge jumps
//! around in memory and slows down on megabyte pieces).
//!
//! Only tokens that BPE produces from their own bytes can appear in an
//! output (reachable tokens, `reach.rs`); the others are left out of the
//! search. The validity test needs the merges to be in rank order, which
//! `reach.rs` checks when the model is made: otherwise this encoder is not
//! used.

use super::affixes::Affixes;
use super::encoder::NO_RANK;
use super::BpeModel;
use crate::trie::Trie;

pub(super) struct Backtracker {
    /// Finds the longest reachable token at the start of a text.
    longest: Trie,
    /// Per token: the longest reachable token that is a strict prefix of it.
    next_prefix: Vec<u32>,
    /// Per token: the pair BPE last merged to make it; `(t, t)` for bytes.
    split: Vec<(u32, u32)>,
}

impl Backtracker {
    /// The encoder for a model whose merges are in rank order (`reach.rs`),
    /// given each token's last merge (`splits`).
    pub(super) fn new(model: &BpeModel, splits: &[(u32, u32)]) -> Self {
        let vocab = &model.vocab;
        let n = vocab.len() as u32;
        let affixes = Affixes::new(vocab);
        let next_prefix = (0..n)
            .map(|id| {
                let mut longest = NO_RANK;
                affixes.for_each_prefix(vocab, vocab.bytes(id), |_, prefix| {
                    if model.reach.is_reachable(prefix) {
                        longest = prefix;
                    }
                });
                longest
            })
            .collect();
        let longest = Trie::new(
            (0..n)
                .filter(|&id| model.reach.is_reachable(id))
                .map(|id| (vocab.bytes(id), id)),
        );
        Backtracker {
            longest,
            next_prefix,
            split: splits.to_vec(),
        }
    }

    /// The longest reachable token at the start of `text` (there is always one:
    /// every single byte is a reachable token).
    #[inline]
    fn longest_token(&self, text: &[u8]) -> u32 {
        self.longest
            .longest_prefix(text)
            .expect("every byte is a token")
            .0
    }

    /// Whether BPE, run on the bytes of `left` followed by those of `right`,
    /// ends with exactly these two tokens. Walking the merges back in time
    /// along the boundary (the right edge of `left`'s merge tree, the left
    /// edge of `right`'s), no pair of boundary parts may have a merge that
    /// BPE would have made before the boundary part changed: a lower rank,
    /// or an equal rank when the competing merge lies to the right (BPE
    /// merges the leftmost of equal ranks first).
    fn is_valid_pair(&self, model: &BpeModel, mut left: u32, mut right: u32) -> bool {
        let mut limit = u32::MAX;
        loop {
            let merged = model.pair_rank(left, right);
            if merged != NO_RANK && merged < limit {
                return false;
            }
            // Undo the later of the two merges that made the boundary parts.
            if left > right {
                limit = left;
                left = self.split[left as usize].1;
                if left == limit {
                    limit = right + 1;
                    right = self.split[right as usize].0;
                    if right + 1 == limit {
                        return true;
                    }
                }
            } else {
                limit = right + 1;
                right = self.split[right as usize].0;
                if right + 1 == limit {
                    limit = left;
                    left = self.split[left as usize].1;
                    if left == limit {
                        return true;
                    }
                }
            }
        }
    }

    /// The BPE tokens of `piece`, appended to `out`; `dead` is scratch,
    /// `memo` remembers pair verdicts (of this model) across calls. Returns
    /// false, with `out` as it was, if the search found no answer, which
    /// merges in rank order rule out: the caller then merges the piece
    /// another way rather than fail.
    pub(super) fn encode(
        &self,
        model: &BpeModel,
        piece: &[u8],
        out: &mut Vec<u32>,
        dead: &mut Vec<bool>,
        memo: &mut PairMemo,
    ) -> bool {
        let start = out.len();
        dead.clear();
        dead.resize(piece.len() + 1, false);
        let mut pos = 0;
        let mut next = self.longest_token(piece);
        while pos < piece.len() {
            let last = (out.len() > start).then(|| out[out.len() - 1]);
            let mut token = next;
            loop {
                let end = pos + model.vocab.token_len(token);
                if !dead[end]
                    && last.is_none_or(|last| memo.is_valid_pair(self, model, last, token))
                {
                    out.push(token);
                    pos = end;
                    if pos < piece.len() {
                        next = self.longest_token(&piece[pos..]);
                    }
                    break;
                }
                let shorter = self.next_prefix[token as usize];
                if shorter != NO_RANK {
                    token = shorter;
                    continue;
                }
                // No token fits here: give the previous one back.
                let Some(last) = last else {
                    debug_assert!(
                        false,
                        "the first token always fits when merges are in rank order"
                    );
                    out.truncate(start);
                    return false;
                };
                dead[pos] = true;
                out.pop();
                pos -= model.vocab.token_len(last);
                next = last;
                break;
            }
        }
        true
    }
}

/// Verdicts of `is_valid_pair`, remembered in a direct-mapped table: text
/// repeats its adjacent token pairs (CJK text above all), and a verdict costs
/// several lookups in the large pair table. Ids are below 2^31 (checked when
/// a model is made), so a slot holds `left << 33 | right << 1 | verdict`.
pub(crate) struct PairMemo {
    slots: Vec<u64>,
}

const MEMO_BITS: u32 = 16;
const EMPTY: u64 = u64::MAX;

impl Default for PairMemo {
    fn default() -> Self {
        PairMemo {
            slots: vec![EMPTY; 1 << MEMO_BITS],
        }
    }
}

impl PairMemo {
    /// Forgets every verdict (another model's would be wrong).
    pub(crate) fn clear(&mut self) {
        self.slots.fill(EMPTY);
    }

    #[inline]
    fn is_valid_pair(
        &mut self,
        backtracker: &Backtracker,
        model: &BpeModel,
        left: u32,
        right: u32,
    ) -> bool {
        let key = ((left as u64) << 33) | ((right as u64) << 1);
        let slot = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> (64 - MEMO_BITS)) as usize;
        let entry = self.slots[slot];
        if entry & !1 == key {
            return entry & 1 == 1;
        }
        let valid = backtracker.is_valid_pair(model, left, right);
        self.slots[slot] = key | valid as u64;
        valid
    }
}
