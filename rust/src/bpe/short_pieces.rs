//! Short pieces looked up in batches: the hot path of encoding running text.
//!
//! Nearly every piece of running text is short (up to 15 bytes: 99.6% of
//! the pieces of English, 86% of Chinese or Russian) and is either a token
//! (90% in English, 50–70% elsewhere) or a piece seen before. Its cost is
//! then the wait for one or two random reads of tables of megabytes, which
//! miss every cache; computing the answer is nothing beside them. So:
//!
//! - **Inline keys.** A short piece is packed into 16 bytes (its bytes, zero
//!   padded, and its length in the last byte: `Key`). Comparing two keys is
//!   two word compares, with no pointer to follow and no `memcmp`.
//! - **One cache line per lookup.** `TokenIndex` (per model, shared by
//!   every thread) holds every token of up to 15 bytes, three keys and their
//!   ids per 64-byte bucket; `PieceMemo` (per thread) holds the pieces this
//!   thread merged, two keys and up to six ids each per 64-byte line.
//! - **Fetched ahead.** The pieces of a text are handed over in batches of
//!   `BATCH` (`PieceBatch`): the key and hash of each piece are computed and
//!   its token index line prefetched as the pre-tokenizer yields it, and the
//!   batch is looked up only when full, in two steps over the whole batch:
//!   the token index, fetching the memo line of each piece that is not a
//!   token, then the memo. The reads of a whole batch overlap instead of
//!   waiting one after the other.
//!
//! Pieces that miss both tables are merged (`encode_merged`); those of
//! more than six ids are kept in the cache of `piece_cache.rs`, looked up
//! before merging, as are the pieces longer than 15 bytes that are no token
//! (a filter of 8 KB tells most of them without the vocabulary). The long
//! pieces' lookups are fetched ahead too, over the batch: the cache's slot,
//! then the record its probe finds (on the multilingual mix, where they
//! are one piece in thirty, a warm pass went 7% faster). Long pieces that
//! may be tokens take the general path, `encode_part`.
//!
//! The keys are the user's text, so the hash is seeded at random (per
//! model) and neither table can be steered into long probes: text cannot
//! choose the memo's lines, which are never more than three quarters
//! taken (its size is bounded: full at 32 MB, it starts afresh), and the
//! token index, built once from the vocabulary, probes at most as far as
//! its longest chain at build time.

use std::hash::{BuildHasher, RandomState};

use super::encoder::EncodeState;
use super::piece_cache::CACHED_PIECE;
use super::BpeModel;
use crate::huge_pages::{HugeTable, Zeroable};
use crate::vocab::Vocab;

/// The longest piece with an inline key.
pub(super) const SHORT: usize = 15;

/// `KEEP_BYTES[n]` keeps the first `n` bytes of a 16-byte word, as masks
/// of its two halves (a table lookup where a 128-bit shift takes several
/// instructions).
const KEEP_BYTES: [[u64; 2]; 16] = {
    let mut masks = [[0u64; 2]; 16];
    let mut n = 1;
    while n < 16 {
        masks[n] = if n < 8 {
            [(1u64 << (8 * n)) - 1, 0]
        } else if n == 8 {
            [u64::MAX, 0]
        } else {
            [u64::MAX, (1u64 << (8 * (n - 8))) - 1]
        };
        n += 1;
    }
    masks
};

/// A short piece: bytes 0..8 in `low`, bytes 8..15 in `high`'s low seven
/// bytes (little-endian, zero past the end), the length in `high`'s top
/// byte. All zeros is no piece (a piece is never empty).
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
#[repr(C)]
pub(super) struct Key {
    low: u64,
    high: u64,
}

impl Key {
    /// The key of `text[start..start + len]`, `1 <= len <= SHORT`. One
    /// 16-byte load, masked, where the text goes on that far (nearly
    /// always).
    #[inline(always)]
    pub(super) fn of(text: &[u8], start: usize, len: usize) -> Key {
        debug_assert!((1..=SHORT).contains(&len) && start + len <= text.len());
        let word = match text.get(start..start + 16) {
            Some(bytes) => u128::from_le_bytes(bytes.try_into().expect("16 bytes")),
            None => {
                let mut bytes = [0u8; 16];
                bytes[..len].copy_from_slice(&text[start..start + len]);
                u128::from_le_bytes(bytes)
            }
        };
        let [low_mask, high_mask] = KEEP_BYTES[len];
        Key {
            low: word as u64 & low_mask,
            high: (word >> 64) as u64 & high_mask | (len as u64) << 56,
        }
    }

    #[inline(always)]
    fn is_empty(self) -> bool {
        self == Key::default()
    }

    /// The key's `seeded_hash`: the seed is secret, so crafted text cannot
    /// choose its buckets.
    #[inline(always)]
    fn hash(self, seed: [u64; 2]) -> u64 {
        seeded_hash(self.low, self.high, seed)
    }
}

/// foldhash's folded multiply of two words with a random seed
/// (`random_seed`).
#[inline(always)]
pub(super) fn seeded_hash(low: u64, high: u64, seed: [u64; 2]) -> u64 {
    let product = (low ^ seed[0]) as u128 * (high ^ seed[1]) as u128;
    product as u64 ^ (product >> 64) as u64
}

/// Every token of up to `SHORT` bytes by its key.
pub(crate) struct TokenIndex {
    seed: [u64; 2],
    /// On huge pages (`huge_pages.rs`): 4 MB for cl100k.
    buckets: HugeTable<Bucket>,
    /// The most buckets any key's probe visits.
    longest_probe: usize,
    /// Bit `long_token_bit(t)` set for every token `t` longer than `SHORT`:
    /// a long piece whose bit is clear is no token, known without a lookup
    /// in the vocabulary (on the mix, nine in ten long pieces are not).
    long_tokens: Box<[u64]>,
}

#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct Bucket {
    keys: [Key; 3],
    ids: [u32; 3],
    /// Whether a key at home here was put in a bucket after it (this one
    /// was full): if not, a key not here is no token. (In the line's last
    /// four bytes, free otherwise.)
    overflowed: bool,
}

impl TokenIndex {
    pub(super) fn new(vocab: &Vocab) -> TokenIndex {
        let short: Vec<(Key, u32)> = (0..vocab.len() as u32)
            .filter_map(|id| {
                let bytes = vocab.bytes(id);
                (bytes.len() <= SHORT).then(|| (Key::of(bytes, 0, bytes.len()), id))
            })
            .collect();
        // At most two thirds full: most probes end in their first bucket.
        let n_buckets = (short.len().div_ceil(2)).next_power_of_two().max(1);
        let mut long_tokens = vec![0u64; LONG_TOKEN_BITS / 64].into_boxed_slice();
        for bytes in vocab.iter().filter(|bytes| bytes.len() > SHORT) {
            let bit = long_token_bit(bytes);
            long_tokens[bit / 64] |= 1 << (bit % 64);
        }
        let mut index = TokenIndex {
            seed: random_seed(),
            buckets: HugeTable::filled(n_buckets, Bucket::default()),
            longest_probe: 1,
            long_tokens,
        };
        let mask = n_buckets - 1;
        for (key, id) in short {
            let home = index.home(key.hash(index.seed));
            let mut at = home;
            let mut probe = 1;
            loop {
                let bucket = &mut index.buckets[at];
                if let Some(slot) = bucket.keys.iter().position(|k| k.is_empty()) {
                    bucket.keys[slot] = key;
                    bucket.ids[slot] = id;
                    break;
                }
                index.buckets[home].overflowed = true;
                at = (at + 1) & mask;
                probe += 1;
            }
            index.longest_probe = index.longest_probe.max(probe);
        }
        index
    }

    /// Whether `piece` (longer than `SHORT`) may be a token: false only if
    /// it is none.
    #[inline(always)]
    fn may_be_long_token(&self, piece: &[u8]) -> bool {
        let bit = long_token_bit(piece);
        self.long_tokens[bit / 64] >> (bit % 64) & 1 == 1
    }

    #[inline(always)]
    fn home(&self, hash: u64) -> usize {
        hash as usize & (self.buckets.len() - 1)
    }

    #[inline(always)]
    fn prefetch(&self, hash: u64) {
        crate::prefetch::line(&self.buckets[self.home(hash)]);
    }

    /// The id of the token `key` is, if it is one. The probe goes past the
    /// home bucket only if it overflowed; past it, buckets fill in order
    /// and nothing is removed, so a bucket with room ends the probe.
    ///
    /// Why the flag: at two thirds full, the home bucket of a piece that is
    /// no token is often full, and the probe went on to the next bucket,
    /// which nothing had fetched: on a warm pass over the multilingual mix
    /// (28% of its pieces are no token), a tenth of `flush` waited there.
    #[inline(always)]
    fn get(&self, key: Key, hash: u64) -> Option<u32> {
        let mask = self.buckets.len() - 1;
        let mut at = self.home(hash);
        let mut probes = self.longest_probe;
        let mut home = true;
        loop {
            let bucket = &self.buckets[at];
            // Unrolled by hand: in the larger `flush`, LLVM kept a counted
            // loop (8 more instructions a piece).
            let [first, second, third] = bucket.keys;
            if first == key {
                return Some(bucket.ids[0]);
            }
            if second == key {
                return Some(bucket.ids[1]);
            }
            if third == key {
                return Some(bucket.ids[2]);
            }
            probes -= 1;
            let ends = if home {
                !bucket.overflowed
            } else {
                third.is_empty()
            };
            if ends || probes == 0 {
                return None;
            }
            home = false;
            at = (at + 1) & mask;
        }
    }
}

/// The bits of `TokenIndex::long_tokens` (8 KB): about one in a hundred
/// is set for cl100k's 1,030 tokens of more than 15 bytes.
const LONG_TOKEN_BITS: usize = 1 << 16;

/// A piece's bit in `TokenIndex::long_tokens`, from its length and its first
/// and last 8 bytes (two loads, whatever its length: `len > SHORT`). Not
/// seeded: the vocabulary sets the bits, and text can only make a piece
/// take the lookup it would take without the filter.
#[inline(always)]
fn long_token_bit(piece: &[u8]) -> usize {
    debug_assert!(piece.len() > SHORT);
    let word = |at: usize| u64::from_le_bytes(piece[at..at + 8].try_into().expect("8 bytes"));
    let mixed = (word(0) ^ word(piece.len() - 8).rotate_left(32) ^ piece.len() as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (mixed >> (64 - LONG_TOKEN_BITS.trailing_zeros())) as usize
}

pub(super) fn random_seed() -> [u64; 2] {
    let state = RandomState::new();
    [state.hash_one(1u8), state.hash_one(2u8)]
}

/// The short pieces a thread has merged, with their ids (up to `MEMO_IDS`):
/// an open-addressing table of 64-byte lines of two entries, probed line
/// after line from the line the hash names.
/// It grows fourfold when three entries in four are taken, from 64 KB up
/// to `MEMO_MAX_LINES` (32 MB, a million pieces); there, it starts afresh.
///
/// Why so dense: the memo's memory is touched for the first time during a
/// first pass, and on a virtual machine a fresh page is slow (the host
/// backs it): the kernel's zeroing of the memo's pages took up to half of a
/// first pass over new pieces. The set-associative memo this replaced (two
/// entries per line and no probing) lost pieces unless a quarter full, so
/// it took 16 MB for the 84,000 merged pieces of 10 MB of English (now
/// 4 MB) and 32 MB for the 223,000 of the multilingual mix (now 16 MB).
/// A lookup still reads one line nearly always: the piece is in its home
/// line, or the line has room and ends the probe.
#[derive(Default)]
pub(crate) struct PieceMemo {
    /// From 4 MB on, on huge pages (`huge_pages.rs`).
    lines: HugeTable<MemoLine>,
    /// Entries taken.
    taken: usize,
}

const MEMO_MIN_LINES: usize = 1 << 10;
const MEMO_MAX_LINES: usize = 1 << 19;
#[derive(Clone, Copy, Default)]
#[repr(C, align(64))]
struct MemoLine {
    /// Taken in order: an empty second entry ends a probe.
    entries: [MemoEntry; 2],
}

// SAFETY: keys and ids are integers; all zero is two empty entries.
unsafe impl Zeroable for MemoLine {}

#[derive(Clone, Copy, Default)]
#[repr(C)]
struct MemoEntry {
    key: Key,
    ids: FewIds,
}

/// Up to `MEMO_IDS` ids below 2^20, packed in two words with their number
/// and copied as a whole (a copy of a variable length compiled to a call of
/// `memmove` per piece): the number in the low four bits of `low`, then
/// three ids of 20 bits each in `low` and three in `high`.
///
/// Why six ids: on the multilingual mix, 4.5% of the pieces are short
/// pieces of four to six ids (5 CJK characters take 15 bytes, and a rare
/// one two or three ids); with three ids a memo entry, they were kept in
/// the piece cache, and every short piece that was not ASCII was looked
/// for in the memo a step early (a step of `flush` that took 11% of a warm
/// pass), so that the cache's lines of those it lacked could be fetched. Now 0.3% of
/// the pieces of the mix are short and have more ids: they are looked up
/// in the cache unfetched.
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
struct FewIds {
    low: u64,
    high: u64,
}

const MEMO_IDS: usize = 6;
const FEW_ID_BITS: u32 = 20;
const FEW_ID_MASK: u64 = (1 << FEW_ID_BITS) - 1;

impl FewIds {
    /// `ids` packed, if they fit.
    fn new(ids: &[u32]) -> Option<FewIds> {
        if !FewIds::fit(ids) {
            return None;
        }
        let mut few = FewIds {
            low: ids.len() as u64,
            high: 0,
        };
        for (i, &id) in ids.iter().enumerate() {
            let (word, shift) = if i < 3 {
                (&mut few.low, 4 + FEW_ID_BITS * i as u32)
            } else {
                (&mut few.high, FEW_ID_BITS * (i as u32 - 3))
            };
            *word |= u64::from(id) << shift;
        }
        Some(few)
    }

    /// Whether the memo can keep `ids`.
    pub(super) fn fit(ids: &[u32]) -> bool {
        ids.len() <= MEMO_IDS && ids.iter().all(|&id| u64::from(id) <= FEW_ID_MASK)
    }

    /// The ids, all `MEMO_IDS` slots (those past the number are zero).
    #[inline(always)]
    fn unpacked(self) -> [u32; MEMO_IDS] {
        let id = |word: u64, shift: u32| (word >> shift & FEW_ID_MASK) as u32;
        [
            id(self.low, 4),
            id(self.low, 4 + FEW_ID_BITS),
            id(self.low, 4 + 2 * FEW_ID_BITS),
            id(self.high, 0),
            id(self.high, FEW_ID_BITS),
            id(self.high, 2 * FEW_ID_BITS),
        ]
    }

    #[inline(always)]
    fn len(self) -> usize {
        (self.low & 0xF) as usize
    }

    #[cfg(test)]
    fn to_vec(self) -> Vec<u32> {
        self.unpacked()[..self.len()].to_vec()
    }
}

impl PieceMemo {
    /// The memo's home line for `hash` (the hash's high half: its low half
    /// places tokens), or `None` before the first store.
    #[inline(always)]
    fn line(&self, hash: u64) -> Option<&MemoLine> {
        self.lines.get(self.home(hash))
    }

    #[inline(always)]
    fn home(&self, hash: u64) -> usize {
        (hash >> 32) as usize & self.lines.len().wrapping_sub(1)
    }

    /// The ids of `key` (whose hash is `hash`), if the memo has them. A
    /// probe ends at a line with room: there is always one.
    #[inline(always)]
    fn get(&self, key: Key, hash: u64) -> Option<FewIds> {
        let mask = self.lines.len().wrapping_sub(1);
        let mut at = self.home(hash);
        loop {
            let [first, second] = self.lines.get(at)?.entries;
            if first.key == key {
                return Some(first.ids);
            }
            if second.key == key {
                return Some(second.ids);
            }
            if second.key.is_empty() {
                return None;
            }
            at = (at + 1) & mask;
        }
    }

    /// Remembers `ids` as the ids of `key` (whose hash with `seed` is
    /// `hash`), which `get` does not find.
    fn store(&mut self, key: Key, hash: u64, seed: [u64; 2], ids: FewIds) {
        if 4 * self.taken >= 3 * 2 * self.lines.len() {
            if self.lines.len() < MEMO_MAX_LINES {
                self.grow(seed);
            } else {
                // Full at the largest size: start afresh, keeping the room.
                self.lines.fill(MemoLine::default());
                self.taken = 0;
            }
        }
        self.put(MemoEntry { key, ids }, hash);
    }

    /// Quadruples the lines (up to `MEMO_MAX_LINES`), keeping what they
    /// hold.
    fn grow(&mut self, seed: [u64; 2]) {
        let lines = (self.lines.len() * 4).clamp(MEMO_MIN_LINES, MEMO_MAX_LINES);
        let old = std::mem::replace(&mut self.lines, HugeTable::zeroed(lines));
        self.taken = 0;
        for entry in old.iter().flat_map(|line| line.entries) {
            if !entry.key.is_empty() {
                self.put(entry, entry.key.hash(seed));
            }
        }
    }

    /// Forgets every piece (another model's turn).
    pub(super) fn clear(&mut self) {
        *self = PieceMemo::default();
    }

    /// Puts `entry` in the first room from its home line on.
    fn put(&mut self, entry: MemoEntry, hash: u64) {
        let mask = self.lines.len() - 1;
        let mut at = self.home(hash);
        loop {
            let line = &mut self.lines[at];
            if let Some(room) = line.entries.iter_mut().find(|e| e.key.is_empty()) {
                *room = entry;
                self.taken += 1;
                return;
            }
            at = (at + 1) & mask;
        }
    }
}

/// How many pieces are looked up together: enough that the reads of one
/// batch overlap, and that a line fetched when its piece is taken arrives
/// before the batch is looked up; few enough that its lines are still in L1
/// when used. 64 against 32, both builds at once on one CPU each (the Rust
/// harness, 8 rounds): English 1.10× warm and 1.08× on a first pass, the
/// whole mix 1.04× and 1.02×, lines 1.00×; 128 against 64, 0.98×.
const BATCH: usize = 64;

#[derive(Clone, Copy)]
pub(super) struct Pending {
    /// A short piece's key (all zeros for a long one).
    key: Key,
    /// A short piece's hash for the token index and the memo; where `token`
    /// is `CACHE_LOOKUP`, the piece's hash in the piece cache instead.
    hash: u64,
    start: u32,
    len: u32,
    /// The piece's id once `flush` found it is a token, else `NO_TOKEN`
    /// or `CACHE_LOOKUP`.
    token: u32,
}

impl Pending {
    /// The piece's bytes in `text`.
    #[inline(always)]
    fn piece<'t>(&self, text: &'t [u8]) -> &'t [u8] {
        &text[self.start as usize..(self.start + self.len) as usize]
    }
}

/// Not a token (found so far).
const NO_TOKEN: u32 = u32::MAX;
/// Not a token, and to be looked up in the piece cache by `Pending::hash`:
/// its lines were fetched. (Token ids are below both: `MAX_RANKS`.)
const CACHE_LOOKUP: u32 = u32::MAX - 1;

/// The pieces of one text on their way to ids (see the module comment):
/// `push` each piece in order, then `finish`.
pub(crate) struct PieceBatch<'a> {
    model: &'a BpeModel,
    index: &'a TokenIndex,
    state: &'a mut EncodeState,
    text: &'a [u8],
    out: &'a mut Vec<u32>,
    /// The thread's buffer of `BATCH` pieces, borrowed from `state` until
    /// `finish` (a fresh array per text would cost a short text more than
    /// its lookups: zeroed, then moved with the batch).
    pending: Vec<Pending>,
}

impl<'a> PieceBatch<'a> {
    pub(crate) fn new(
        model: &'a BpeModel,
        state: &'a mut EncodeState,
        text: &'a str,
        out: &'a mut Vec<u32>,
    ) -> Self {
        let mut pending = std::mem::take(&mut state.pending);
        pending.clear();
        pending.reserve(BATCH);
        PieceBatch {
            model,
            index: model.token_index(),
            state,
            text: text.as_bytes(),
            out,
            pending,
        }
    }

    /// Takes the next piece, `text[start..start + len]`.
    #[inline(always)]
    pub(crate) fn push(&mut self, start: usize, len: usize) {
        let mut pending = Pending {
            key: Key::default(),
            hash: 0,
            start: start as u32,
            len: len as u32,
            token: NO_TOKEN,
        };
        if len <= SHORT {
            pending.key = Key::of(self.text, start, len);
            pending.hash = pending.key.hash(self.index.seed);
            self.index.prefetch(pending.hash);
        }
        self.pending.push(pending);
        if self.pending.len() == BATCH {
            self.flush();
        }
    }

    /// Encodes the pieces taken so far.
    pub(crate) fn finish(mut self) {
        self.flush();
        self.state.pending = std::mem::take(&mut self.pending);
    }

    fn flush(&mut self) {
        let PieceBatch {
            model,
            index,
            state,
            text,
            out,
            pending,
        } = self;
        // Steps over the whole batch, each reading what the one before
        // fetched and fetching what the next reads, so that the reads of a
        // batch overlap instead of waiting one after the other:
        // 1. the token index (fetched by `push`); for the short pieces that
        //    are not tokens, fetch the memo line; for the long pieces that
        //    are no token, the piece cache's slot. (Fetching the memo line
        //    of every piece in `push`, when nine in ten are tokens in
        //    English, cost more instructions there.)
        // 2. for the long pieces, the slots, fetching the record each probe
        //    finds.
        // 3. the ids: the token, the memo's, the piece cache's, or merged.
        // English text, of short pieces, takes neither step 2 nor the cache.
        let mut fetch = false;
        for p in pending.iter_mut() {
            if p.len as usize <= SHORT {
                if let Some(id) = index.get(p.key, p.hash) {
                    p.token = id;
                } else if let Some(line) = state.memo.line(p.hash) {
                    crate::prefetch::line(line);
                }
            } else if p.len as usize <= CACHED_PIECE && !index.may_be_long_token(p.piece(text)) {
                p.hash = state.cache.hash(p.piece(text));
                state.cache.prefetch_slot(p.hash);
                p.token = CACHE_LOOKUP;
                fetch = true;
            }
        }
        if fetch {
            for p in pending.iter().filter(|p| p.token == CACHE_LOOKUP) {
                state.cache.prefetch_record(p.hash);
            }
        }
        // Step 3 writes the ids of tokens and of memo entries through a
        // pointer, into room reserved for the whole batch, the length kept
        // in a register: with `push`, every piece stored the vector's
        // length and the next one loaded it back (English warm: a wait of a
        // few cycles a piece). The other pieces go through `out` itself.
        out.reserve(pending.len() * MEMO_IDS);
        let (mut ids_at, mut len) = (out.as_mut_ptr(), out.len());
        for (done, p) in pending.iter().enumerate() {
            if p.token < CACHE_LOOKUP {
                // SAFETY: room for `MEMO_IDS` ids per piece left is reserved.
                unsafe { ids_at.add(len).write(p.token) };
                len += 1;
                continue;
            }
            // (Also where step 1 found no memo: an earlier piece of the
            // batch may have been this one, merged and stored since.)
            if p.len as usize <= SHORT {
                if let Some(ids) = state.memo.get(p.key, p.hash) {
                    // SAFETY: as above; all `MEMO_IDS` written, `len()` kept.
                    unsafe {
                        ids_at
                            .add(len)
                            .cast::<[u32; MEMO_IDS]>()
                            .write_unaligned(ids.unpacked())
                    };
                    len += ids.len();
                    continue;
                }
            }
            // SAFETY: the ids up to `len` are written.
            unsafe { out.set_len(len) };
            let piece = p.piece(text);
            if p.len as usize > SHORT {
                let cache_hash = (p.token == CACHE_LOOKUP).then_some(p.hash);
                match cache_hash {
                    Some(_) => model.encode_merged(piece, cache_hash, true, |_| false, out, state),
                    None => model.encode_part(piece, true, out, state),
                }
            } else {
                // Short, and not in the memo: merged, unless its ids are
                // too many for the memo, then in the piece cache (0.3% of
                // the pieces of the mix) or merged and kept there.
                let cache_hash = Some(state.cache.hash(piece));
                let first = out.len();
                model.encode_merged(piece, cache_hash, true, FewIds::fit, out, state);
                if let Some(ids) = FewIds::new(&out[first..]) {
                    state.memo.store(p.key, p.hash, index.seed, ids);
                }
            }
            out.reserve((pending.len() - done - 1) * MEMO_IDS);
            (ids_at, len) = (out.as_mut_ptr(), out.len());
        }
        // SAFETY: as above.
        unsafe { out.set_len(len) };
        pending.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn few(ids: &[u32]) -> FewIds {
        FewIds::new(ids).expect("ids that fit")
    }

    #[test]
    fn up_to_six_ids_of_twenty_bits_are_packed_and_read_back() {
        let largest = (1 << 20) - 1;
        for ids in [
            &[][..],
            &[0],
            &[largest],
            &[1, 2, 3],
            &[largest, 0, largest, 7],
            &[9, 8, 7, 6, 5, largest],
        ] {
            let packed = few(ids);
            assert_eq!(packed.to_vec(), ids);
        }
        // Seven ids, or an id of 21 bits, do not fit.
        assert_eq!(FewIds::new(&[1; 7]), None);
        assert_eq!(FewIds::new(&[1, 1 << 20]), None);
    }

    #[test]
    fn keys_hold_the_bytes_and_the_length() {
        let text = b"abcdefghijklmnopqrstuvwxyz";
        // Within the text and at its very end (the copying path) alike.
        assert_eq!(Key::of(text, 0, 3), Key::of(b"abc", 0, 3));
        assert_eq!(Key::of(text, 23, 3), Key::of(b"xyz", 0, 3));
        assert_eq!(Key::of(text, 11, 15), Key::of(b"lmnopqrstuvwxyz", 0, 15));
        // Same bytes, another length; zero bytes count.
        assert_ne!(Key::of(b"a\0", 0, 1), Key::of(b"a\0", 0, 2));
        assert!(!Key::of(b"\0", 0, 1).is_empty());
    }

    #[test]
    fn the_token_index_finds_every_short_token_and_nothing_else() {
        let mut tokens: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
        tokens.extend((0..3000u32).map(|i| format!("t{i}").into_bytes()));
        tokens.push(b"exactly fifteen".to_vec());
        tokens.push(b"sixteen bytes!!!".to_vec());
        let vocab = Vocab::new(tokens).unwrap();
        let index = TokenIndex::new(&vocab);
        // Some tokens live past their full home bucket, some buckets did not
        // overflow: both ends of a probe are taken.
        let overflowed = index.buckets.iter().filter(|b| b.overflowed).count();
        assert!(overflowed > 0 && overflowed < index.buckets.len());
        for id in 0..vocab.len() as u32 {
            let bytes = vocab.bytes(id);
            let found = (bytes.len() <= SHORT).then(|| {
                let key = Key::of(bytes, 0, bytes.len());
                index.get(key, key.hash(index.seed))
            });
            let expected = (bytes.len() <= SHORT).then_some(Some(id));
            assert_eq!(found, expected, "token {id}");
        }
        // Every long token passes the filter, and few other long pieces do.
        for id in 0..vocab.len() as u32 {
            let bytes = vocab.bytes(id);
            assert!(bytes.len() <= SHORT || index.may_be_long_token(bytes));
        }
        let passed = (0..10_000)
            .filter(|i| index.may_be_long_token(format!("not a token {i:>8}").as_bytes()))
            .count();
        assert!(passed < 100, "{passed} of 10,000");
        for absent in [&b"t3000"[..], b"tt", b"\0\0", b"exactly fifteeN"] {
            let key = Key::of(absent, 0, absent.len());
            assert_eq!(index.get(key, key.hash(index.seed)), None);
        }
    }

    #[test]
    fn pieces_of_one_home_line_probe_the_lines_after_it() {
        let mut memo = PieceMemo::default();
        let seed = [0, 0];
        let key = |i: u32| Key::of(format!("k{i}").as_bytes(), 0, format!("k{i}").len());
        let line = |at: u64| at << 32;
        assert_eq!(memo.get(key(0), line(0)), None);
        // Twenty pieces with one home line (hashes of the test's choosing,
        // so stored before the memo first grows) fill it and the nine lines
        // after it, each with its ids.
        let ids = |i: u32| [i, 1, 2, 3, 4, 5][..1 + i as usize % MEMO_IDS].to_vec();
        for i in 0..20 {
            memo.store(key(i), line(0), seed, few(&ids(i)));
        }
        for i in 0..20 {
            let found = memo.get(key(i), line(0)).expect("kept");
            assert_eq!(found.to_vec(), ids(i));
        }
        assert_eq!(memo.taken, 20);
        // A piece at home in the run of full lines is looked for up to the
        // first line with room, and stored there.
        assert_eq!(memo.get(key(20), line(3)), None);
        memo.store(key(20), line(3), seed, few(&[20]));
        assert_eq!(memo.lines[10].entries[0].key, key(20));
        assert_eq!(memo.get(key(20), line(3)), Some(few(&[20])));
        // Past the run, a line of its own.
        assert_eq!(memo.get(key(0), line(11)), None);
    }

    #[test]
    fn the_memo_keeps_every_piece_as_it_grows() {
        let mut memo = PieceMemo::default();
        let seed = [0x243F_6A88_85A3_08D3, 0x1319_8A2E_0370_7344];
        let keys: Vec<Key> = (0..60_000u32)
            .map(|i| Key::of(format!("p{i}").as_bytes(), 0, format!("p{i}").len()))
            .collect();
        for (i, &key) in keys.iter().enumerate() {
            memo.store(key, key.hash(seed), seed, few(&[i as u32]));
        }
        // Grown from 1,024 lines three times, to 65,536 (131,072 entries,
        // of which 60,000 take less than three in four); below the largest
        // size nothing is lost.
        assert_eq!(memo.lines.len(), MEMO_MIN_LINES << 6);
        assert_eq!(memo.taken, keys.len());
        for (i, &key) in keys.iter().enumerate() {
            assert_eq!(memo.get(key, key.hash(seed)), Some(few(&[i as u32])));
        }
        // Cleared (another model's turn): nothing is found, and the memo
        // starts again from its smallest size.
        memo.clear();
        assert!(keys
            .iter()
            .all(|&key| memo.get(key, key.hash(seed)).is_none()));
        memo.store(keys[0], keys[0].hash(seed), seed, few(&[7]));
        assert_eq!(memo.get(keys[0], keys[0].hash(seed)), Some(few(&[7])));
        assert_eq!(memo.lines.len(), MEMO_MIN_LINES);
    }

    #[test]
    fn the_memo_starts_afresh_when_full_at_its_largest() {
        let mut memo = PieceMemo::default();
        let seed = [0x4528_21E6_38D0_1377, 0xBE54_66CF_34E9_0C6C];
        let full = 3 * 2 * MEMO_MAX_LINES / 4;
        let keys: Vec<Key> = (0..full as u32 + 1000)
            .map(|i| Key::of(&i.to_le_bytes(), 0, 4))
            .collect();
        for (i, &key) in keys.iter().enumerate() {
            memo.store(key, key.hash(seed), seed, few(&[i as u32]));
        }
        // Three in four entries taken at the largest size, then forgotten:
        // only the pieces stored since are there, with their ids.
        assert_eq!(memo.lines.len(), MEMO_MAX_LINES);
        assert_eq!(memo.taken, 1000);
        for (i, &key) in keys.iter().enumerate() {
            let expected = (i >= full).then(|| few(&[i as u32]));
            assert_eq!(memo.get(key, key.hash(seed)), expected, "piece {i}");
        }
    }
}
