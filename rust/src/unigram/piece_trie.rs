//! The pieces of a Unigram model in a double-array trie whose nodes carry
//! their piece's score, laid out for the Viterbi encoder's walk.
//!
//! The encoder walks the trie from every character start, so a step must
//! cost as little memory traffic as possible. Each node is one 8-byte unit
//! of a flat array: its children sit at `base + byte`, and a child is
//! recognised by the byte it stores (a double array, Aoe 1989). Bases are
//! distinct, so the byte alone says whose child a unit is. A step reads one
//! unit, and that unit already holds the score of the piece ending there:
//! no separate lookup of a piece's value, kind or score per match. Nodes are
//! placed busiest first (by the probability of the pieces below them, a
//! proxy for how often walks pass them), so that the prefixes most walks
//! take share a few cache lines: on a 32,000-piece model this is ~7% faster
//! than breadth-first order, and depth-first order is ~30% slower. The
//! piece ids, needed only for the pieces of the best path, are in a
//! separate array by unit.
//!
//! Building places each node's children at the first base where all their
//! slots are free, searching only the last `SEARCH_WINDOW` units: O(nodes ×
//! SEARCH_WINDOW) at worst. The array fills up densely (over 90% of units),
//! so the search visits only the bases whose first child's unit is free,
//! found 64 at a time in a bitset: some milliseconds for 32,000 pieces.

use std::collections::BinaryHeap;

use super::{Piece, PieceKind, SPACE_SYMBOL};
use crate::error::{Error, Result};
use crate::trie::KeyTree;

/// The score of a node where no piece can be chosen: no piece ends there,
/// or an unused one. Never better than a best path, so the encoder need not
/// tell these nodes apart.
pub(super) const NO_PIECE: f32 = f32::NEG_INFINITY;

/// The link of a unit: `base << BASE_SHIFT | IN_USE | byte`.
const BASE_SHIFT: u32 = 9;
const IN_USE: u32 = 1 << 8;
const MAX_BASE: u32 = u32::MAX >> BASE_SHIFT;
/// How far back from the end of the array a node's children are placed.
const SEARCH_WINDOW: usize = 1024;

const FREE: Unit = Unit {
    link: 0,
    score: NO_PIECE,
};

#[derive(Clone, Copy)]
struct Unit {
    /// Where the children are, and which byte leads here (see `BASE_SHIFT`);
    /// 0 for a free unit.
    link: u32,
    /// The score of the piece that ends here, or `NO_PIECE`.
    score: f32,
}

/// A node reached by a walk: its unit and that unit's contents.
#[derive(Clone, Copy)]
pub(super) struct Node {
    pub index: u32,
    pub score: f32,
    base: u32,
}

pub(super) struct PieceTrie {
    units: Vec<Unit>,
    /// The id of the piece that ends at each unit (`u32::MAX`: none).
    ids: Vec<u32>,
    root_base: u32,
}

impl PieceTrie {
    /// The trie of the pieces the encoder matches: normal, user-defined and
    /// unused ones (as SentencePiece's trie). A user-defined piece scores
    /// 0.1 per byte after the first (SentencePiece's bonus, which makes it
    /// win over the normal pieces, whose scores are negative). Scores must be
    /// finite, as SentencePiece requires. With `ascii_spaces`, a `▁` of a
    /// piece is the byte `' '` in the trie (see `UnigramModel::walk_text`).
    pub fn new(pieces: &[Piece], ascii_spaces: bool) -> Result<Self> {
        let mut keys = Vec::new();
        for (id, piece) in pieces.iter().enumerate() {
            if !piece.score.is_finite() {
                return Err(Error::invalid(format!(
                    "piece {id} ({:?}) has the score {}",
                    piece.text, piece.score
                )));
            }
            let score = match piece.kind {
                PieceKind::Normal => piece.score,
                PieceKind::UserDefined => (0.1 * (piece.text.len() as f64 - 1.0)) as f32,
                PieceKind::Unused => NO_PIECE,
                _ => continue,
            };
            let key = if ascii_spaces {
                piece.text.replace(SPACE_SYMBOL, " ").into_bytes()
            } else {
                piece.text.as_bytes().to_vec()
            };
            keys.push((key, id as u32, score));
        }
        keys.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let sorted: Vec<_> = keys
            .iter()
            .map(|(key, id, score)| (key.as_slice(), Some((*id, *score))))
            .collect();
        let tree = Tree::from_sorted(&sorted, None);
        Self::place(&tree)
    }

    /// Lays the tree's nodes out in the double array, busiest first.
    fn place(tree: &Tree) -> Result<Self> {
        // The root takes unit 0; its link is not IN_USE, so no walk ever
        // mistakes it for a child.
        let mut units = vec![FREE];
        let mut ids = vec![u32::MAX];
        // Base 0 marks a node without children until the end.
        let mut base_taken = vec![true];
        let mut free = FreeUnits::default();
        // Every unit before this one is taken.
        let mut first_free = 1;
        let mut root_base = 0;
        // Nodes get their children's slots busiest first, as far as the
        // model tells: by the summed probability (e^score) of the pieces at
        // and below them. The nodes most walks pass then share the first
        // cache lines of the array. (The bits of a non-negative f64 order as
        // the number does.)
        let weights = weights(tree);
        let mut queue = BinaryHeap::from([(weights[0].to_bits(), 0u32, 0u32)]);
        while let Some((_, node, unit)) = queue.pop() {
            let children = tree.children(node);
            let Some((first_byte, _)) = children.clone().next() else {
                continue;
            };
            while units.get(first_free).is_some_and(|u| u.link != 0) {
                first_free += 1;
            }
            // Searches start at the first free unit, but no further back
            // than SEARCH_WINDOW units from the end: holes that few bases
            // can fill (low units, below most bytes) would make every
            // search rescan them, and building quadratic.
            let search_from = first_free.max(units.len().saturating_sub(SEARCH_WINDOW));
            let fits = |base: usize| {
                !base_taken.get(base).copied().unwrap_or(false)
                    && children.clone().all(|(byte, _)| {
                        units.get(base + byte as usize).is_none_or(|u| u.link == 0)
                    })
            };
            // The first base that fits, among those where the first child's
            // unit is free.
            let mut slot = search_from.max(first_byte as usize);
            let base = loop {
                slot = free.next(slot, units.len());
                if fits(slot - first_byte as usize) {
                    break slot - first_byte as usize;
                }
                slot += 1;
            };
            if base > MAX_BASE as usize {
                return Err(Error::invalid("too many pieces for the trie"));
            }
            if base_taken.len() <= base {
                base_taken.resize(base + 1, false);
            }
            base_taken[base] = true;
            let end = base + 256;
            if units.len() < end {
                units.resize(end, FREE);
                ids.resize(end, u32::MAX);
                free.grow(end);
            }
            if unit == 0 {
                root_base = base as u32;
            }
            units[unit as usize].link |= (base as u32) << BASE_SHIFT;
            for (byte, child) in children {
                let index = base + byte as usize;
                let (id, score) = tree.values[child as usize].unwrap_or((u32::MAX, NO_PIECE));
                units[index] = Unit {
                    link: IN_USE | byte as u32,
                    score,
                };
                free.take(index);
                ids[index] = id;
                queue.push((weights[child as usize].to_bits(), child, index as u32));
            }
        }
        // Point the leaves at a block of free units that no node's children
        // use, so their walks stop at once.
        let empty = units.len() as u32;
        if empty > MAX_BASE {
            return Err(Error::invalid("too many pieces for the trie"));
        }
        for unit in units.iter_mut().skip(1) {
            if unit.link & IN_USE != 0 && unit.link >> BASE_SHIFT == 0 {
                unit.link |= empty << BASE_SHIFT;
            }
        }
        units.resize(units.len() + 256, FREE);
        ids.resize(units.len(), u32::MAX);
        Ok(PieceTrie {
            units,
            ids,
            root_base,
        })
    }

    /// The root, where every walk starts.
    #[inline(always)]
    pub fn root(&self) -> Node {
        Node {
            index: 0,
            score: NO_PIECE,
            base: self.root_base,
        }
    }

    /// The child of `node` along `byte`.
    #[inline(always)]
    pub fn child(&self, node: Node, byte: u8) -> Option<Node> {
        let index = node.base + byte as u32;
        let unit = self.units[index as usize];
        (unit.link & (IN_USE | 0xFF) == IN_USE | byte as u32).then_some(Node {
            index,
            score: unit.score,
            base: unit.link >> BASE_SHIFT,
        })
    }

    /// The id of the piece that ends at a node with a piece.
    #[inline(always)]
    pub fn id(&self, index: u32) -> u32 {
        self.ids[index as usize]
    }

    /// A value per unit (indexed by `Node::index`): `of_piece(id)` where
    /// a piece that can win ends (its score is no `NO_PIECE`), else `none`.
    pub fn per_unit<T: Copy>(&self, of_piece: impl Fn(u32) -> T, none: T) -> Vec<T> {
        self.units
            .iter()
            .zip(&self.ids)
            .map(|(unit, &id)| {
                if unit.score == NO_PIECE || id == u32::MAX {
                    none
                } else {
                    of_piece(id)
                }
            })
            .collect()
    }
}

/// Which units of the array are free, a bit each (set: free).
#[derive(Default)]
struct FreeUnits {
    bits: Vec<u64>,
}

impl FreeUnits {
    /// Units up to `len` exist (the new ones free).
    fn grow(&mut self, len: usize) {
        let old = self.bits.len() * 64;
        if len > old {
            self.bits.resize(len.div_ceil(64), 0);
            for unit in old..self.bits.len() * 64 {
                self.bits[unit / 64] |= 1 << (unit % 64);
            }
        }
    }

    fn take(&mut self, unit: usize) {
        self.bits[unit / 64] &= !(1 << (unit % 64));
    }

    /// The first free unit from `unit` on; every unit from `len` on is.
    fn next(&self, unit: usize, len: usize) -> usize {
        let mut word = unit / 64;
        let mut bits = self
            .bits
            .get(word)
            .map_or(0, |&b| b & (u64::MAX << (unit % 64)));
        while bits == 0 {
            word += 1;
            if word >= self.bits.len() {
                return unit.max(len);
            }
            bits = self.bits[word];
        }
        (word * 64 + bits.trailing_zeros() as usize).min(unit.max(len))
    }
}

/// The pieces as a plain tree: `(id, score)` where a piece ends.
type Tree = KeyTree<Option<(u32, f32)>>;

/// Each node's summed probability of the pieces at and below it.
fn weights(tree: &Tree) -> Vec<f64> {
    let mut weights = vec![0.0; tree.len()];
    // Children come after their parent.
    for node in (0..tree.len()).rev() {
        let own = tree.values[node].map_or(0.0, |(_, score)| f64::from(score).exp());
        let below: f64 = tree
            .children(node as u32)
            .map(|(_, child)| weights[child as usize])
            .sum();
        weights[node] = own + below;
    }
    weights
}

#[cfg(test)]
mod tests {
    use super::*;

    fn piece(text: &str, score: f32, kind: PieceKind) -> Piece {
        Piece {
            text: text.into(),
            score,
            kind,
        }
    }

    /// The nodes along `key`: `(id, score)` where a piece ends.
    fn walk(trie: &PieceTrie, key: &[u8]) -> Vec<Option<(u32, f32)>> {
        let mut node = trie.root();
        let mut out = Vec::new();
        for &byte in key {
            let Some(next) = trie.child(node, byte) else {
                break;
            };
            node = next;
            out.push((node.score != NO_PIECE).then(|| (trie.id(node.index), node.score)));
        }
        out
    }

    #[test]
    fn pieces_along_a_walk() {
        let pieces = [
            piece("<unk>", 0.0, PieceKind::Unknown),
            piece("a", -1.0, PieceKind::Normal),
            piece("abc", -2.0, PieceKind::Normal),
            piece("ab", -3.0, PieceKind::Unused),
            piece("b", -4.0, PieceKind::Normal),
            piece("<0x61>", 0.0, PieceKind::Byte),
            piece("\u{ff}", -5.0, PieceKind::Normal),
        ];
        let trie = PieceTrie::new(&pieces, false).unwrap();
        assert_eq!(
            walk(&trie, b"abcd"),
            [Some((1, -1.0)), None, Some((2, -2.0))]
        );
        assert_eq!(walk(&trie, b"ba"), [Some((4, -4.0))]);
        assert_eq!(walk(&trie, "\u{ff}".as_bytes()), [None, Some((6, -5.0))]);
        assert_eq!(walk(&trie, b"<0x61>"), []);
        assert_eq!(walk(&trie, b"c"), []);
    }

    #[test]
    fn user_defined_and_bad_scores() {
        let mut pieces = vec![
            piece("<unk>", 0.0, PieceKind::Unknown),
            piece("xyz", -9.0, PieceKind::UserDefined),
        ];
        let trie = PieceTrie::new(&pieces, false).unwrap();
        assert_eq!(walk(&trie, b"xyz"), [None, None, Some((1, 0.2))]);
        pieces.push(piece("y", f32::NAN, PieceKind::Normal));
        assert!(PieceTrie::new(&pieces, false).is_err());
    }

    /// Every byte below every node: only the keys' paths exist.
    #[test]
    fn no_false_children() {
        let words: Vec<String> = (0..2000u32)
            .map(|i| format!("{:x}{}", i * 7919, i % 13))
            .collect();
        let pieces: Vec<Piece> = words
            .iter()
            .map(|w| piece(w, -1.0, PieceKind::Normal))
            .collect();
        let trie = PieceTrie::new(&pieces, false).unwrap();
        let mut prefixes: Vec<&[u8]> = words
            .iter()
            .flat_map(|w| (0..=w.len()).map(|n| &w.as_bytes()[..n]))
            .collect();
        prefixes.sort_unstable();
        prefixes.dedup();
        for prefix in &prefixes {
            let mut node = trie.root();
            for &byte in *prefix {
                node = trie.child(node, byte).expect("a prefix's path exists");
            }
            for byte in 0..=255u8 {
                let mut longer = prefix.to_vec();
                longer.push(byte);
                let exists = prefixes.binary_search(&longer.as_slice()).is_ok();
                assert_eq!(trie.child(node, byte).is_some(), exists, "{longer:?}");
            }
        }
    }
}
