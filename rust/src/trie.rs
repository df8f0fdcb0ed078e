//! A byte trie for longest-prefix matching: which key is the longest prefix
//! of a text. BPE's backtracking encoder asks this once per token; a
//! general multi-pattern matcher (Aho-Corasick) would build failure links
//! that an anchored search never uses and costs more per query.
//!
//! Layout: the children of the root and of every node with many children
//! (such as `▁` in a SentencePiece vocabulary, with thousands) in dense
//! 256-entry tables, every other node's children as a sorted run of a few
//! edges in one flat array (most nodes have one or two). A step costs one
//! table read or a scan of at most `DENSE_FROM - 1` edges, so a query costs
//! O(1) per matched byte. Building sorts the keys, then takes O(total key
//! length).

const NONE: u32 = u32::MAX;
/// Nodes with this many children or more get a dense table.
const DENSE_FROM: usize = 16;

#[derive(Clone, Copy)]
struct Node {
    /// The node's children are `edges[first_edge..first_edge + n_edges]`.
    first_edge: u32,
    n_edges: u32,
    /// The value of the key that ends here, or `NONE`.
    value: u32,
    /// Its dense table of children in `dense`, or `NONE`.
    dense: u32,
}

/// The keys as a plain tree, built from keys in sorted order: each key
/// shares the path of the one before for their common prefix and adds its
/// own nodes after it, so children come in byte order and no map of edges
/// is needed. Node 0 is the root; children come after their parent. (The
/// tries here, and the Unigram encoder's, are laid out from it.)
pub(crate) struct KeyTree<V> {
    /// `(byte, child)` of each node.
    pub children: Vec<Vec<(u8, u32)>>,
    /// The value of the key that ends at each node, or the `empty` value.
    pub values: Vec<V>,
}

impl<V: Copy> KeyTree<V> {
    /// The tree of distinct, non-empty keys given in sorted order.
    pub fn from_sorted<'k>(sorted: impl IntoIterator<Item = (&'k [u8], V)>, empty: V) -> Self {
        let mut tree = KeyTree {
            children: vec![Vec::new()],
            values: vec![empty],
        };
        // The nodes along the previous key: path[d] is its prefix of length d.
        let mut path: Vec<u32> = vec![0];
        let mut previous: &[u8] = &[];
        for (key, value) in sorted {
            debug_assert!(previous < key, "keys must be sorted and distinct");
            let common = key.iter().zip(previous).take_while(|(a, b)| a == b).count();
            path.truncate(common + 1);
            for &byte in &key[common..] {
                let parent = *path.last().expect("the root is always on the path");
                let child = tree.children.len() as u32;
                tree.children[parent as usize].push((byte, child));
                tree.children.push(Vec::new());
                tree.values.push(empty);
                path.push(child);
            }
            tree.values[*path.last().expect("non-empty") as usize] = value;
            previous = key;
        }
        tree
    }
}

pub struct Trie {
    nodes: Vec<Node>,
    /// `(byte, child node)`, sorted by byte within each node.
    edges: Vec<(u8, u32)>,
    /// Child by byte (`NONE`: none), for the nodes that have one.
    dense: Vec<[u32; 256]>,
}

impl Trie {
    /// A trie of `(key, value)` pairs; keys are non-empty and distinct. A
    /// key with the value `Trie::NO_VALUE` only makes its nodes exist.
    pub fn new<'k>(keys: impl IntoIterator<Item = (&'k [u8], u32)>) -> Self {
        let mut sorted: Vec<(&[u8], u32)> = keys.into_iter().collect();
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
        let KeyTree { children, values } = KeyTree::from_sorted(sorted, NONE);
        // Number the nodes breadth-first: the short prefixes, which every
        // query reads, then sit together in memory.
        let mut order = Vec::with_capacity(children.len());
        order.push(0u32);
        let mut next = 0;
        while next < order.len() {
            let node = order[next] as usize;
            order.extend(children[node].iter().map(|&(_, child)| child));
            next += 1;
        }
        let mut new_id = vec![0u32; children.len()];
        for (new, &old) in order.iter().enumerate() {
            new_id[old as usize] = new as u32;
        }
        let mut nodes = Vec::with_capacity(children.len());
        let mut edges = Vec::with_capacity(children.len());
        let mut dense = Vec::new();
        for (i, &old) in order.iter().enumerate() {
            let list: Vec<(u8, u32)> = children[old as usize]
                .iter()
                .map(|&(byte, child)| (byte, new_id[child as usize]))
                .collect();
            let value = values[old as usize];
            let mut node = Node {
                first_edge: edges.len() as u32,
                n_edges: list.len() as u32,
                value,
                dense: NONE,
            };
            if i == Self::ROOT as usize || list.len() >= DENSE_FROM {
                let mut table = [NONE; 256];
                for &(byte, child) in list.iter() {
                    table[byte as usize] = child;
                }
                node.dense = dense.len() as u32;
                dense.push(table);
            }
            nodes.push(node);
            edges.extend_from_slice(&list);
        }
        Trie {
            nodes,
            edges,
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
            first_edge,
            n_edges,
            dense,
            ..
        } = self.nodes[node as usize];
        let child = if dense != NONE {
            self.dense[dense as usize][byte as usize]
        } else {
            let edges = &self.edges[first_edge as usize..(first_edge + n_edges) as usize];
            match edges.iter().find(|&&(b, _)| b >= byte) {
                Some(&(b, child)) if b == byte => child,
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
            first_edge,
            n_edges,
            ..
        } = self.nodes[node as usize];
        self.edges[first_edge as usize..(first_edge + n_edges) as usize]
            .iter()
            .copied()
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
