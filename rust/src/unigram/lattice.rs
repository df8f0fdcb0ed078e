//! The lattice of a text: every piece occurrence, for the k best
//! segmentations and for sampling (subword regularization).
//!
//! Nodes are the pieces that start at a character start, as the Viterbi
//! encoder sees them (unknown characters included, each as an unknown node),
//! grouped by the byte where they end. Byte fallback and the merging of
//! unknown runs are applied to each segmentation afterwards, as in `encode`.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use super::UnigramModel;
use crate::error::Result;

#[derive(Clone, Copy, Debug)]
struct Node {
    id: u32,
    start: usize,
    score: f64,
}

struct Lattice {
    /// Nodes by the byte where they end.
    ending_at: Vec<Vec<Node>>,
}

impl UnigramModel {
    fn lattice(&self, bytes: &[u8]) -> Lattice {
        let mut ending_at = vec![Vec::new(); bytes.len() + 1];
        self.for_each_piece_start(bytes, |start, matches| {
            for &(end, id, score) in matches {
                ending_at[end].push(Node {
                    id,
                    start,
                    score: score as f64,
                });
            }
        });
        Lattice { ending_at }
    }

    /// The ids of a segmentation given as nodes in text order: unknown runs
    /// merged, byte fallback applied.
    fn ids_of(&self, bytes: &[u8], nodes: &[Node], ends: &[usize]) -> Vec<u32> {
        let mut out = Vec::with_capacity(nodes.len());
        let mut i = 0;
        while i < nodes.len() {
            let node = nodes[i];
            if node.id != self.unk {
                out.push(node.id);
                i += 1;
                continue;
            }
            let mut j = i;
            while j + 1 < nodes.len() && nodes[j + 1].id == self.unk {
                j += 1;
            }
            match &self.byte_pieces {
                Some(byte_ids) => {
                    self.push_byte_pieces(byte_ids, &bytes[node.start..ends[j]], &mut out)
                }
                None => out.push(self.unk),
            }
            i = j + 1;
        }
        out
    }

    /// The `k` best segmentations of a piece (normalized text, `▁` for
    /// spaces) with their scores (sums of piece scores), best first; the
    /// first is `encode_piece`'s.
    pub fn nbest(&self, piece: &str, k: usize) -> Result<Vec<(Vec<u32>, f64)>> {
        self.unigram_only("nbest")?;
        let walk = self.walk_of(piece)?;
        let bytes = &walk[..];
        let n = bytes.len();
        if k == 0 {
            return Ok(Vec::new());
        }
        if n == 0 {
            return Ok(vec![(Vec::new(), 0.0)]);
        }
        let lattice = self.lattice(bytes);
        // Forward: the best score of a path from the start to each byte.
        let mut forward = vec![f64::NEG_INFINITY; n + 1];
        forward[0] = 0.0;
        for end in 1..=n {
            for node in &lattice.ending_at[end] {
                forward[end] = forward[end].max(forward[node.start] + node.score);
            }
        }
        // Backward A*: a hypothesis is a path from some byte to the end; its
        // priority, its score plus the best score before it, is exact, so
        // complete paths come out best first.
        struct Hypothesis {
            priority: f64,
            score: f64,
            at: usize,
            /// The hypothesis it extends (index in `made`) and the node added.
            parent: Option<(usize, Node)>,
        }
        impl PartialEq for Hypothesis {
            fn eq(&self, other: &Self) -> bool {
                self.cmp(other) == Ordering::Equal
            }
        }
        impl Eq for Hypothesis {}
        impl PartialOrd for Hypothesis {
            fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
                Some(self.cmp(other))
            }
        }
        impl Ord for Hypothesis {
            fn cmp(&self, other: &Self) -> Ordering {
                self.priority.total_cmp(&other.priority)
            }
        }
        let mut made: Vec<(Option<(usize, Node)>, usize)> = Vec::new();
        let mut heap = BinaryHeap::from([Hypothesis {
            priority: forward[n],
            score: 0.0,
            at: n,
            parent: None,
        }]);
        let mut viterbi = Vec::new();
        self.encode_walk(bytes, &mut viterbi, None);
        let mut results = vec![(viterbi.clone(), forward[n])];
        // Bounded work: a text has at most this many expansions tried.
        let mut budget = 10_000 * k.max(1) + 100 * n;
        while let Some(hypothesis) = heap.pop() {
            let index = made.len();
            made.push((hypothesis.parent, hypothesis.at));
            if hypothesis.at == 0 {
                // From the complete hypothesis back to the empty one: the
                // nodes in text order, each ending where its parent stood.
                let mut nodes = Vec::new();
                let mut ends = Vec::new();
                let mut cursor = Some(index);
                while let Some(i) = cursor {
                    cursor = made[i].0.map(|(parent, node)| {
                        nodes.push(node);
                        ends.push(made[parent].1);
                        parent
                    });
                }
                let ids = self.ids_of(bytes, &nodes, &ends);
                if ids != viterbi && !results.iter().any(|(other, _)| *other == ids) {
                    results.push((ids, hypothesis.score));
                }
                if results.len() == k {
                    break;
                }
                continue;
            }
            for &node in &lattice.ending_at[hypothesis.at] {
                let score = hypothesis.score + node.score;
                heap.push(Hypothesis {
                    priority: score + forward[node.start],
                    score,
                    at: node.start,
                    parent: Some((index, node)),
                });
            }
            budget = budget.saturating_sub(1);
            if budget == 0 {
                break;
            }
        }
        results.truncate(k);
        Ok(results)
    }

    /// One segmentation of a piece (as for `nbest`) drawn with probability
    /// proportional to exp(alpha × score) (subword regularization), by
    /// forward filtering and backward sampling; `seed` makes the draw
    /// reproducible.
    pub fn sample(&self, piece: &str, alpha: f64, seed: u64) -> Result<Vec<u32>> {
        self.unigram_only("sample")?;
        let walk = self.walk_of(piece)?;
        let bytes = &walk[..];
        let n = bytes.len();
        if n == 0 {
            return Ok(Vec::new());
        }
        let lattice = self.lattice(bytes);
        // Where alpha × score leaves f64's range, exp(alpha × score) puts all
        // the weight on the best segmentation: the limit is what is drawn
        // (computed as is, every weight would be 0 and every draw junk).
        let largest = lattice
            .ending_at
            .iter()
            .flatten()
            .map(|node| node.score.abs())
            .fold(0.0, f64::max);
        if !(alpha * largest * n as f64).is_finite() {
            let mut ids = Vec::new();
            self.encode_piece(piece, &mut ids, None);
            return Ok(ids);
        }
        // Forward: log of the summed weight of all paths to each byte.
        let mut forward = vec![f64::NEG_INFINITY; n + 1];
        forward[0] = 0.0;
        for end in 1..=n {
            forward[end] = log_sum_exp(
                lattice.ending_at[end]
                    .iter()
                    .map(|node| forward[node.start] + alpha * node.score),
            );
        }
        let mut random = SplitMix64(seed);
        let mut nodes = Vec::new();
        let mut ends = Vec::new();
        let mut end = n;
        while end > 0 {
            let candidates = &lattice.ending_at[end];
            let draw = random.next_f64();
            let mut cumulative = 0.0;
            let mut chosen = candidates[candidates.len() - 1];
            for node in candidates {
                cumulative += (forward[node.start] + alpha * node.score - forward[end]).exp();
                if draw < cumulative {
                    chosen = *node;
                    break;
                }
            }
            nodes.push(chosen);
            ends.push(end);
            end = chosen.start;
        }
        nodes.reverse();
        ends.reverse();
        Ok(self.ids_of(bytes, &nodes, &ends))
    }
}

fn log_sum_exp(values: impl Iterator<Item = f64> + Clone) -> f64 {
    let max = values.clone().fold(f64::NEG_INFINITY, f64::max);
    if max == f64::NEG_INFINITY {
        return max;
    }
    max + values.map(|v| (v - max).exp()).sum::<f64>().ln()
}

/// A small, fast, seedable generator (SplitMix64): enough for sampling
/// segmentations, and reproducible across platforms.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}
