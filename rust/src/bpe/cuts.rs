//! Cut points: where a piece can be cut into parts that BPE encodes
//! independently, with the same result as the whole piece.
//!
//! Every part BPE makes is a token. If no token of the vocabulary occurs in
//! the piece across position q (no token equal to `piece[a..b]` with
//! a < q < b), no merge ever joins bytes on both sides of q, and the merges
//! on each side do not depend on the other side: encoding the two sides
//! separately gives the same ids. Such cuts are common in CJK text, whose
//! pieces are whole phrases: cut into words, they are mostly tokens or
//! already in the cache, instead of a long merge each.
//!
//! The test is conservative (it may miss a cut, never invent one): a token
//! across q either contains the four bytes `piece[q-2..q+2]`, or starts with
//! `piece[q-1..q+1]`, or ends with it. The two-byte cases are exact bitmaps;
//! the four-byte windows of all tokens go into a hashed bitmap, whose false
//! positives only cost a missed cut. Cost: O(n) table lookups per piece, in
//! tables of 8, 8 and 256 KB that stay in cache.

/// log2 of the bits of the four-byte window filter.
const WINDOW_BITS: u32 = 21;

pub(crate) struct CutFilter {
    /// Bit `256 * x + y`: some token starts with the bytes x y.
    starts: Box<[u64]>,
    /// Bit `256 * x + y`: some token ends with the bytes x y.
    ends: Box<[u64]>,
    /// Bit `window_slot(w)`: some token contains the four bytes w.
    windows: Box<[u64]>,
}

#[inline(always)]
fn get(bits: &[u64], i: usize) -> bool {
    bits[i / 64] >> (i % 64) & 1 != 0
}

fn set(bits: &mut [u64], i: usize) {
    bits[i / 64] |= 1 << (i % 64);
}

#[inline(always)]
fn pair_slot(x: u8, y: u8) -> usize {
    (x as usize) << 8 | y as usize
}

#[inline(always)]
fn window_slot(window: &[u8]) -> usize {
    let w = u32::from_le_bytes(window.try_into().expect("a four-byte window"));
    (w.wrapping_mul(0x9E37_79B1) >> (32 - WINDOW_BITS)) as usize
}

impl CutFilter {
    pub(crate) fn new<'v>(tokens: impl Iterator<Item = &'v [u8]>) -> CutFilter {
        let mut filter = CutFilter {
            starts: vec![0; 1 << 10].into_boxed_slice(),
            ends: vec![0; 1 << 10].into_boxed_slice(),
            windows: vec![0; 1 << (WINDOW_BITS - 6)].into_boxed_slice(),
        };
        for token in tokens {
            if let [x, y, ..] = *token {
                set(&mut filter.starts, pair_slot(x, y));
            }
            if let [.., x, y] = *token {
                set(&mut filter.ends, pair_slot(x, y));
            }
            for window in token.windows(4) {
                set(&mut filter.windows, window_slot(window));
            }
        }
        filter
    }

    /// Whether `piece` can be cut at `q` (2 <= q <= len - 2).
    #[inline(always)]
    fn is_cut(&self, piece: &[u8], q: usize) -> bool {
        let pair = pair_slot(piece[q - 1], piece[q]);
        !get(&self.starts, pair)
            && !get(&self.ends, pair)
            && !get(&self.windows, window_slot(&piece[q - 2..q + 2]))
    }

    /// The first cut of `piece` at or after byte `from`, if any. Only
    /// character boundaries are tried: a cut inside a UTF-8 character is
    /// possible but rare, and trying every byte would cost more than it saves.
    #[inline]
    pub(crate) fn next_cut(&self, piece: &[u8], from: usize) -> Option<usize> {
        let last = piece.len().checked_sub(2)?;
        (from.max(2)..=last).find(|&q| piece[q] & 0xC0 != 0x80 && self.is_cut(piece, q))
    }
}
