//! A byte trie for longest-prefix matching: which key is the longest prefix
//! of a text. BPE's backtracking encoder asks this once per token; a
//! general multi-pattern matcher (Aho-Corasick) would build failure links
//! that an anchored search never uses and costs more per query.
//!
//! Layout: nodes are numbered breadth-first, a parent before its children
//! and a shallower node before a deeper one, so the children of a node are
//! consecutive nodes and an edge needs only its byte, stored once per node
//! (the byte that leads to it). The children of the root and of every node
//! with many children (such as `▁` in a SentencePiece vocabulary, with
//! thousands) are also in dense 256-entry tables; every other node's
//! children are found by scanning their bytes (most nodes have one or two).
//! A step costs one table read or a scan of at most `DENSE_FROM - 1` bytes,
//! so a query costs O(1) per matched byte. A node takes 17 bytes besides
//! the dense tables.
//!
//! Building sorts the keys, then takes O(total key length) time; the
//! memory it takes besides the finished trie is 9 bytes per node and some
//! per key (`KeyTree::from_sorted`), so a vocabulary with a token of
//! millions of bytes builds in memory proportional to it. (A vector of
//! edges per node would take over 60 bytes per node.)

const NONE: u32 = u32::MAX;
/// Nodes with this many children or more get a dense table.
const DENSE_FROM: u32 = 16;

#[derive(Clone, Copy)]
struct Node {
    /// The node's children are the nodes `first_child..first_child + n_children`.
    first_child: u32,
    n_children: u32,
    /// The value of the key that ends here, or `NONE`.
    value: u32,
    /// Its dense table of children in `dense`, or `NONE`.
    dense: u32,
}

/// The keys as a plain tree, numbered breadth-first: the root is node 0, a
/// node's children are consecutive nodes in byte order, and every node
/// comes after its parent. (The tries here, and the Unigram encoder's, are
/// laid out from it.)
pub(crate) struct KeyTree<V> {
    /// The children of node `v` are the nodes `first_child[v]..first_child[v + 1]`.
    first_child: Vec<u32>,
    /// The byte of the edge into each node (0 for the root).
    bytes: Vec<u8>,
    /// The value of the key that ends at each node, or the `empty` value.
    pub values: Vec<V>,
}

/// A key still being laid out by `KeyTree::from_sorted`.
struct OpenKey {
    /// Its index in the sorted keys.
    key: u32,
    /// The node of its prefix as long as the current depth.
    node: u32,
    /// How many bytes it shares with the open key before it.
    shared: u32,
}

impl<V: Copy> KeyTree<V> {
    /// The tree of distinct, non-empty keys given in sorted order.
    ///
    /// Breadth-first order is the order of the keys' distinct prefixes by
    /// length, then bytes. So the nodes are made one depth at a time, by a
    /// pass over the keys longer than that depth (in sorted order): the
    /// prefix of a key is a new node unless the key before it shares that
    /// prefix. Each pass costs one step per such key, so building takes
    /// O(total key length) time and, besides the tree, memory per key only.
    pub fn from_sorted(sorted: &[(&[u8], V)], empty: V) -> Self {
        // Every byte of a key may be a node: reserve that much, once, rather
        // than let the arrays grow by copying (freed again at the end).
        let bound = 1 + sorted.iter().map(|(key, _)| key.len()).sum::<usize>();
        let mut tree = KeyTree {
            first_child: Vec::with_capacity(bound + 1),
            bytes: Vec::with_capacity(bound),
            values: Vec::with_capacity(bound),
        };
        tree.bytes.push(0);
        tree.values.push(empty);
        let mut open: Vec<OpenKey> = (0..sorted.len())
            .map(|i| OpenKey {
                key: i as u32,
                node: 0,
                shared: match i {
                    0 => 0,
                    _ => {
                        debug_assert!(sorted[i - 1].0 < sorted[i].0, "keys must be sorted");
                        common_prefix(sorted[i - 1].0, sorted[i].0) as u32
                    }
                },
            })
            .collect();
        let mut depth = 0;
        while !open.is_empty() {
            // The nodes of depth + 1, then the keys that go deeper.
            for entry in open.iter_mut() {
                let key = sorted[entry.key as usize].0;
                debug_assert!(!key.is_empty(), "keys must be non-empty");
                if entry.shared as usize <= depth {
                    // Parents come in order: every node up to this one
                    // whose children are all made has its `first_child`.
                    let child = tree.bytes.len() as u32;
                    while tree.first_child.len() <= entry.node as usize {
                        tree.first_child.push(child);
                    }
                    tree.bytes.push(key[depth]);
                    tree.values.push(empty);
                }
                debug_assert!(
                    entry.shared as usize <= depth || key.len() > depth + 1,
                    "keys must be distinct"
                );
                entry.node = tree.bytes.len() as u32 - 1;
                if key.len() == depth + 1 {
                    tree.values[entry.node as usize] = sorted[entry.key as usize].1;
                }
            }
            depth += 1;
            // A key that ends leaves the list; the key after it then shares
            // with the one before it the least of their shares with it.
            let mut carried = u32::MAX;
            open.retain_mut(|entry| {
                let shared = carried.min(entry.shared);
                if sorted[entry.key as usize].0.len() > depth {
                    entry.shared = shared;
                    carried = u32::MAX;
                    true
                } else {
                    carried = shared;
                    false
                }
            });
        }
        let n = tree.bytes.len() as u32;
        tree.first_child.resize(n as usize + 1, n);
        tree.first_child.shrink_to_fit();
        tree.bytes.shrink_to_fit();
        tree.values.shrink_to_fit();
        tree
    }

    /// The number of nodes, root included.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// The children of `node` with their bytes, in byte order.
    pub fn children(&self, node: u32) -> impl Iterator<Item = (u8, u32)> + Clone + '_ {
        let node = node as usize;
        (self.first_child[node]..self.first_child[node + 1])
            .map(|child| (self.bytes[child as usize], child))
    }
}

/// The length of the longest common prefix of `a` and `b`.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

pub struct Trie {
    nodes: Vec<Node>,
    /// The byte of the edge into each node.
    bytes: Vec<u8>,
    /// Child by byte (`NONE`: none), for the nodes that have one.
    dense: Vec<[u32; 256]>,
}

impl Trie {
    /// A trie of `(key, value)` pairs; keys are non-empty and distinct. A
    /// key with the value `Trie::NO_VALUE` only makes its nodes exist.
    /// Nodes are numbered breadth-first (see the module doc).
    pub fn new<'k>(keys: impl IntoIterator<Item = (&'k [u8], u32)>) -> Self {
        let mut sorted: Vec<(&[u8], u32)> = keys.into_iter().collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let tree = KeyTree::from_sorted(&sorted, NONE);
        drop(sorted);
        let mut nodes = Vec::with_capacity(tree.len());
        let mut dense = Vec::new();
        for (i, &value) in tree.values.iter().enumerate() {
            let (first_child, end) = (tree.first_child[i], tree.first_child[i + 1]);
            let mut node = Node {
                first_child,
                n_children: end - first_child,
                value,
                dense: NONE,
            };
            if i == Self::ROOT as usize || node.n_children >= DENSE_FROM {
                let mut table = [NONE; 256];
                for (byte, child) in tree.children(i as u32) {
                    table[byte as usize] = child;
                }
                node.dense = dense.len() as u32;
                dense.push(table);
            }
            nodes.push(node);
        }
        Trie {
            nodes,
            bytes: tree.bytes,
            dense,
        }
    }

    /// The root node (the empty key).
    pub const ROOT: u32 = 0;
    pub const NO_VALUE: u32 = NONE;

    /// The number of nodes, root included; nodes are `0..len()`.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.len() == 1
    }

    /// The child of `node` along `byte`.
    #[inline(always)]
    pub fn child(&self, node: u32, byte: u8) -> Option<u32> {
        let Node {
            first_child,
            n_children,
            dense,
            ..
        } = self.nodes[node as usize];
        let child = if dense != NONE {
            self.dense[dense as usize][byte as usize]
        } else {
            let bytes = &self.bytes[first_child as usize..(first_child + n_children) as usize];
            match bytes.iter().position(|&b| b >= byte) {
                Some(i) if bytes[i] == byte => first_child + i as u32,
                _ => NONE,
            }
        };
        (child != NONE).then_some(child)
    }

    /// The value of the key that ends at `node`, if one does.
    #[inline(always)]
    pub fn value(&self, node: u32) -> Option<u32> {
        let value = self.nodes[node as usize].value;
        (value != NONE).then_some(value)
    }

    /// The children of `node` with their bytes, in byte order.
    pub fn children(&self, node: u32) -> impl Iterator<Item = (u8, u32)> + '_ {
        let Node {
            first_child,
            n_children,
            ..
        } = self.nodes[node as usize];
        (first_child..first_child + n_children).map(|child| (self.bytes[child as usize], child))
    }

    /// The value of the longest key that is a prefix of `text`, with the
    /// key's length.
    #[inline]
    pub fn longest_prefix(&self, text: &[u8]) -> Option<(u32, usize)> {
        let mut best = None;
        let mut node = Self::ROOT;
        for (len, &byte) in text.iter().enumerate() {
            let Some(child) = self.child(node, byte) else {
                break;
            };
            node = child;
            if let Some(value) = self.value(node) {
                best = Some((value, len + 1));
            }
        }
        best
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_prefixes() {
        let keys: [&[u8]; 5] = [b"a", b"ab", b"abcd", b"b", b"\xff\x00"];
        let trie = Trie::new(keys.iter().enumerate().map(|(i, k)| (*k, i as u32)));
        assert_eq!(trie.longest_prefix(b"abcde"), Some((2, 4)));
        assert_eq!(trie.longest_prefix(b"abc"), Some((1, 2)));
        assert_eq!(trie.longest_prefix(b"a"), Some((0, 1)));
        assert_eq!(trie.longest_prefix(b"ba"), Some((3, 1)));
        assert_eq!(trie.longest_prefix(b"\xff\x00\x01"), Some((4, 2)));
        assert_eq!(trie.longest_prefix(b"\xff"), None);
        assert_eq!(trie.longest_prefix(b"c"), None);
        assert_eq!(trie.longest_prefix(b""), None);
    }

    #[test]
    fn navigation() {
        let keys: [&[u8]; 3] = [b"ab", b"ac", b"b"];
        let trie = Trie::new(keys.iter().enumerate().map(|(i, k)| (*k, i as u32)));
        let a = trie.child(Trie::ROOT, b'a').unwrap();
        assert_eq!(trie.value(a), None);
        let children: Vec<(u8, Option<u32>)> =
            trie.children(a).map(|(b, n)| (b, trie.value(n))).collect();
        assert_eq!(children, [(b'b', Some(0)), (b'c', Some(1))]);
        assert_eq!(trie.child(a, b'd'), None);
        assert_eq!(trie.len(), 5);
    }
}
