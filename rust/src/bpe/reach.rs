//! What BPE can make of a vocabulary, worked out once when a model is made,
//! so that the encoder never relies on a property the vocabulary lacks.
//!
//! A token is *reachable* when BPE run on its own bytes ends with that one
//! token. Only reachable tokens can come out of merging: BPE inside a longer
//! text treats the bytes of a token that it forms exactly as it would treat
//! them alone (no merge crosses the token's edges before it forms, and the
//! merges inside follow the same rank order), so a token formed anywhere is
//! formed alone. tiktoken emits an unreachable token only for a piece that
//! is exactly its bytes (its whole-piece lookup); a part of a piece cut
//! where no token crosses (`cuts.rs`) is merged like any text instead.
//! Trained vocabularies have none, but rank files made by other tools can
//! (ranks 256 bytes + `bcaac`: `bcaac` is unreachable).
//!
//! The merges are *in rank order* when the last merge that makes each
//! reachable token joins two tokens of lower rank. Then BPE on any text
//! merges in increasing rank order (a merge can only enable pairs of higher
//! rank), which is what the backtracking encoder (`backtrack.rs`) relies
//! on to judge a pair of tokens from their merge trees. Rank files whose
//! ranks do not follow merge order (`aab` ranked before `aa`, or cl100k with
//! ranks swapped) are encoded with the heap merge instead: O(n log n) rather
//! than O(n) on huge pieces, and exact.
//!
//! Cost: one merge of each token's bytes (with the tokens of lower rank,
//! then with all tokens only for the rare token that needs it), on all
//! cores.

use super::encoder::{MergeBuffers, NO_RANK, SHORT_PIECE};
use super::BpeModel;

pub(super) struct Reach {
    /// Bit `id` set: token `id` is unreachable. `None` when none is.
    unreachable: Option<Box<[u64]>>,
    /// Per token: the pair its last merge joins (`(t, t)` for single bytes
    /// and unreachable tokens), when the merges are in rank order.
    splits: Option<Vec<(u32, u32)>>,
}

/// What the merge of one token's bytes says about it.
enum Verdict {
    /// Made by merging two tokens of lower rank (or a single byte).
    InOrder(u32, u32),
    /// Reachable, but only through tokens of higher rank.
    OutOfOrder,
    Unreachable,
}

impl Reach {
    /// Before analysis: every token reachable, no merge order known.
    pub(super) fn unknown() -> Reach {
        Reach {
            unreachable: None,
            splits: None,
        }
    }

    pub(super) fn new(model: &BpeModel) -> Reach {
        let n = model.vocab.len() as u32;
        // On fresh scoped threads, not rayon's pool: a model is also made
        // when a tokenizer is unpickled in a forked child, which inherits a
        // pool whose threads did not survive the fork.
        let threads = std::thread::available_parallelism().map_or(1, |t| t.get()) as u32;
        let chunk = n.div_ceil(threads).max(1);
        let verdicts: Vec<Verdict> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..n)
                .step_by(chunk as usize)
                .map(|start| {
                    scope.spawn(move || {
                        let (mut buffers, mut parts) = (MergeBuffers::default(), Vec::new());
                        (start..(start + chunk).min(n))
                            .map(|id| verdict(model, id, &mut buffers, &mut parts))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            workers
                .into_iter()
                .flat_map(|worker| worker.join().expect("a verdict worker does not panic"))
                .collect()
        });
        let mut unreachable = None;
        let mut in_order = true;
        for (id, verdict) in verdicts.iter().enumerate() {
            match verdict {
                Verdict::InOrder(..) => {}
                Verdict::OutOfOrder => in_order = false,
                Verdict::Unreachable => {
                    let bits = unreachable.get_or_insert_with(|| {
                        vec![0u64; (n as usize).div_ceil(64)].into_boxed_slice()
                    });
                    bits[id / 64] |= 1 << (id % 64);
                }
            }
        }
        let splits = in_order.then(|| {
            verdicts
                .iter()
                .enumerate()
                .map(|(id, verdict)| match *verdict {
                    Verdict::InOrder(left, right) => (left, right),
                    _ => (id as u32, id as u32),
                })
                .collect()
        });
        Reach {
            unreachable,
            splits,
        }
    }

    #[inline(always)]
    pub(super) fn is_reachable(&self, id: u32) -> bool {
        self.unreachable
            .as_ref()
            .is_none_or(|bits| bits[id as usize / 64] >> (id % 64) & 1 == 0)
    }

    /// The last merge of every token, when the merges are in rank order.
    pub(super) fn splits(&self) -> Option<&[(u32, u32)]> {
        self.splits.as_deref()
    }
}

fn verdict(model: &BpeModel, id: u32, buffers: &mut MergeBuffers, parts: &mut Vec<u32>) -> Verdict {
    let bytes = model.vocab.bytes(id);
    if bytes.len() == 1 {
        return Verdict::InOrder(id, id);
    }
    // With the tokens of lower rank only, BPE must stop one merge short.
    parts.clear();
    if bytes.len() <= SHORT_PIECE {
        model.merge_short(bytes, id, parts);
    } else {
        model.merge_below(bytes, id, parts, buffers);
    }
    if let [left, right] = parts[..] {
        if model.pair_rank(left, right) == id && left < id && right < id {
            return Verdict::InOrder(left, right);
        }
    }
    parts.clear();
    model.merge_below(bytes, NO_RANK, parts, buffers);
    if parts[..] == [id] {
        Verdict::OutOfOrder
    } else {
        Verdict::Unreachable
    }
}
