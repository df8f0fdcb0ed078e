//! Lookups of short pieces by value: the hot path of encoding.
//!
//! Nine pieces in ten of running text are 15 bytes or fewer, and most are
//! whole tokens. Such a piece fits in a 16-byte key (its bytes, zero-padded,
//! and its length in the last byte), built from at most two overlapping
//! loads per half; two tables keyed by it replace the generic hash tables
//! on that path:
//! - [`ShortTokens`], per model: every token of 1 to 15 bytes with its id.
//!   A lookup hashes the key with one multiplication, and compares two
//!   words per slot it probes: no length-prefixed hashing of a slice, no
//!   call to compare bytes.
//! - [`ShortCache`], per thread: the ids of short pieces merged earlier,
//!   up to three inline in the slot (most merged pieces have two or three
//!   tokens), more in a side array. Its keys are the user's text, so it
//!   hashes with a random seed: text crafted to collide would otherwise pile
//!   its pieces into one probe sequence.
//!
//! Both are open-addressing tables with linear probing, at most half full,
//! whose 32-byte slots never straddle a cache line.

use std::hash::BuildHasher;

/// The longest piece with a short key.
pub(crate) const SHORT: usize = 15;

/// A piece of 1 to 15 bytes as two words: its bytes in little-endian order,
/// zero-padded, and its length in the top byte of the second word (so a
/// key is never all zeros and `"a"` differs from `"a\0"`).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct ShortKey {
    low: u64,
    high: u64,
}

impl ShortKey {
    /// The key of `bytes`, or `None` if it is empty or longer than
    /// [`SHORT`]. Reads only inside `bytes`, with at most four loads.
    #[inline(always)]
    pub(crate) fn new(bytes: &[u8]) -> Option<ShortKey> {
        let n = bytes.len();
        let load8 = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().unwrap());
        let load4 = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as u64;
        let (low, high) = match n {
            // Bytes 8..n are the top of the last eight, shifted down.
            9..=SHORT => (load8(0), load8(n - 8) >> (8 * (16 - n))),
            8 => (load8(0), 0),
            // Two overlapping 4-byte loads.
            4..=7 => (load4(0) | load4(n - 4) << (8 * (n - 4)), 0),
            1..=3 => {
                let b = |i: usize| (bytes[i] as u64) << (8 * i);
                (b(0) | b(n / 2) | b(n - 1), 0)
            }
            _ => return None,
        };
        Some(ShortKey {
            low,
            high: high | (n as u64) << 56,
        })
    }

    /// A 64-bit hash: one 64 x 64 -> 128-bit multiplication of the two
    /// words, each mixed with a seed, folded (foldhash's core step).
    #[inline(always)]
    fn hash(self, seed: [u64; 2]) -> u64 {
        let product = ((self.low ^ seed[0]) as u128) * ((self.high ^ seed[1]) as u128);
        (product as u64) ^ ((product >> 64) as u64)
    }
}

/// Empty slots have an all-zero key, which no piece has.
const EMPTY: ShortKey = ShortKey { low: 0, high: 0 };

/// A power-of-two number of slots, at least twice `entries`.
fn capacity_for(entries: usize) -> usize {
    (entries * 2).next_power_of_two().max(16)
}

#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct TokenSlot {
    key: ShortKey,
    id: u32,
}

/// The tokens of 1 to 15 bytes of a vocabulary, by value. Its keys are
/// the model's, fixed when it is built, so a fixed seed serves: a lookup
/// probes at most the longest run of full slots, which the vocabulary, not
/// the text, decides.
pub(crate) struct ShortTokens {
    slots: Box<[TokenSlot]>,
    mask: usize,
}

const TOKEN_SEED: [u64; 2] = [0x243F_6A88_85A3_08D3, 0x1319_8A2E_0370_7344];

impl ShortTokens {
    pub(crate) fn new<'a>(tokens: impl Iterator<Item = &'a [u8]>) -> ShortTokens {
        let short: Vec<(ShortKey, u32)> = tokens
            .enumerate()
            .filter_map(|(id, bytes)| Some((ShortKey::new(bytes)?, id as u32)))
            .collect();
        let capacity = capacity_for(short.len());
        let empty = TokenSlot { key: EMPTY, id: 0 };
        let mut table = ShortTokens {
            slots: vec![empty; capacity].into_boxed_slice(),
            mask: capacity - 1,
        };
        for (key, id) in short {
            let mut at = key.hash(TOKEN_SEED) as usize & table.mask;
            // Tokens are distinct (the vocabulary checks), so no key repeats.
            while table.slots[at].key != EMPTY {
                at = (at + 1) & table.mask;
            }
            table.slots[at] = TokenSlot { key, id };
        }
        table
    }

    /// The id of the token whose key is `key`.
    #[inline(always)]
    pub(crate) fn get(&self, key: ShortKey) -> Option<u32> {
        let mut at = key.hash(TOKEN_SEED) as usize & self.mask;
        loop {
            let slot = &self.slots[at];
            if slot.key == key {
                return Some(slot.id);
            }
            if slot.key == EMPTY {
                return None;
            }
            at = (at + 1) & self.mask;
        }
    }
}

/// Ids kept in a slot itself; more go to [`ShortCache::spill`].
const INLINE_IDS: usize = 3;

#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct CacheSlot {
    key: ShortKey,
    /// How many ids the piece has.
    len: u32,
    /// The ids, or `[start in spill, ..]` when there are more than
    /// `INLINE_IDS`.
    ids: [u32; INLINE_IDS],
}

/// The ids of short pieces merged earlier on this thread (see the module
/// documentation). It grows to at most `MAX_SLOTS` slots and then starts
/// afresh: memory stays bounded on any input.
pub(crate) struct ShortCache {
    seed: [u64; 2],
    slots: Vec<CacheSlot>,
    len: usize,
    spill: Vec<u32>,
}

const EMPTY_CACHE_SLOT: CacheSlot = CacheSlot {
    key: EMPTY,
    len: 0,
    ids: [0; INLINE_IDS],
};

/// At most 2^20 slots of 32 bytes (32 MB), half full: 2^19 pieces, about
/// what multilingual text of tens of megabytes holds (at 2^18 slots, the
/// cache of the multilingual mix was cleared before the text repeated).
const MAX_SLOTS: usize = 1 << 20;
const FIRST_SLOTS: usize = 1 << 12;

impl Default for ShortCache {
    fn default() -> Self {
        let random = foldhash::fast::RandomState::default();
        ShortCache {
            seed: [random.hash_one(1u64), random.hash_one(2u64)],
            slots: Vec::new(),
            len: 0,
            spill: Vec::new(),
        }
    }
}

impl ShortCache {
    /// The slot of `key`, or the empty slot where it would go.
    #[inline(always)]
    fn find(&self, key: ShortKey) -> usize {
        let mask = self.slots.len() - 1;
        let mut at = key.hash(self.seed) as usize & mask;
        loop {
            let slot = &self.slots[at];
            if slot.key == key || slot.key == EMPTY {
                return at;
            }
            at = (at + 1) & mask;
        }
    }

    /// The ids cached for `key`.
    #[inline(always)]
    pub(crate) fn get(&self, key: ShortKey) -> Option<&[u32]> {
        if self.slots.is_empty() {
            return None;
        }
        let slot = &self.slots[self.find(key)];
        if slot.key == EMPTY {
            return None;
        }
        let len = slot.len as usize;
        Some(if len <= INLINE_IDS {
            &slot.ids[..len]
        } else {
            let start = slot.ids[0] as usize;
            &self.spill[start..start + len]
        })
    }

    /// Caches `ids` for `key`, which is not cached yet.
    pub(crate) fn insert(&mut self, key: ShortKey, ids: &[u32]) {
        if 2 * (self.len + 1) > self.slots.len() {
            if self.slots.len() >= MAX_SLOTS {
                self.clear();
            }
            self.grow();
        }
        let mut slot = CacheSlot {
            key,
            len: ids.len() as u32,
            ids: [0; INLINE_IDS],
        };
        if ids.len() <= INLINE_IDS {
            slot.ids[..ids.len()].copy_from_slice(ids);
        } else {
            slot.ids[0] = self.spill.len() as u32;
            self.spill.extend_from_slice(ids);
        }
        let at = self.find(key);
        self.slots[at] = slot;
        self.len += 1;
    }

    /// Doubles the table (or makes the first one), rehashing its entries.
    fn grow(&mut self) {
        let capacity = (self.slots.len() * 2).max(FIRST_SLOTS);
        let old = std::mem::replace(&mut self.slots, vec![EMPTY_CACHE_SLOT; capacity]);
        for slot in old.into_iter().filter(|s| s.key != EMPTY) {
            let at = self.find(slot.key);
            self.slots[at] = slot;
        }
    }

    pub(crate) fn clear(&mut self) {
        self.slots.clear();
        self.len = 0;
        self.spill.clear();
    }
}

/// The most recent pieces of up to [`INLINE_IDS`] ids, direct-mapped: a
/// table small enough to stay in the core's L2 cache, in front of the two
/// larger ones. Text repeats a few thousand pieces most of the time, and a
/// probe here costs an L2 hit where the larger tables cost an L3 hit and
/// often a TLB miss. One slot per hash, so a lookup is one probe whatever
/// the text; a new piece replaces the one in its slot.
pub(crate) struct HotPieces {
    seed: [u64; 2],
    slots: Box<[CacheSlot]>,
}

const HOT_SLOTS: usize = 1 << 14;

impl Default for HotPieces {
    fn default() -> Self {
        let random = foldhash::fast::RandomState::default();
        HotPieces {
            seed: [random.hash_one(3u64), random.hash_one(4u64)],
            slots: vec![EMPTY_CACHE_SLOT; HOT_SLOTS].into_boxed_slice(),
        }
    }
}

impl HotPieces {
    #[inline(always)]
    fn slot(&self, key: ShortKey) -> usize {
        key.hash(self.seed) as usize & (HOT_SLOTS - 1)
    }

    #[inline(always)]
    pub(crate) fn get(&self, key: ShortKey) -> Option<&[u32]> {
        let slot = &self.slots[self.slot(key)];
        (slot.key == key).then(|| &slot.ids[..slot.len as usize])
    }

    #[inline(always)]
    pub(crate) fn insert(&mut self, key: ShortKey, ids: &[u32]) {
        if ids.len() <= INLINE_IDS {
            let at = self.slot(key);
            let slot = &mut self.slots[at];
            slot.key = key;
            slot.len = ids.len() as u32;
            slot.ids[..ids.len()].copy_from_slice(ids);
        }
    }

    pub(crate) fn clear(&mut self) {
        self.slots.fill(EMPTY_CACHE_SLOT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive_key(bytes: &[u8]) -> ShortKey {
        let mut padded = [0u8; 16];
        padded[..bytes.len()].copy_from_slice(bytes);
        padded[15] = bytes.len() as u8;
        ShortKey {
            low: u64::from_le_bytes(padded[..8].try_into().unwrap()),
            high: u64::from_le_bytes(padded[8..].try_into().unwrap()),
        }
    }

    #[test]
    fn keys_are_the_padded_bytes_and_the_length() {
        let bytes: Vec<u8> = (1..=20).collect();
        assert_eq!(ShortKey::new(&[]), None);
        for n in 1..=SHORT {
            assert_eq!(
                ShortKey::new(&bytes[..n]),
                Some(naive_key(&bytes[..n])),
                "length {n}"
            );
        }
        assert_eq!(ShortKey::new(&bytes[..16]), None);
        assert_ne!(ShortKey::new(b"a"), ShortKey::new(b"a\0"));
    }

    #[test]
    fn tokens_and_cache_find_what_they_hold() {
        let tokens: Vec<Vec<u8>> = (0..5000u32)
            .map(|i| format!("t{i}").into_bytes())
            .chain([
                b"a".to_vec(),
                b"a\0".to_vec(),
                vec![0xFF; 15],
                vec![b'x'; 16],
            ])
            .collect();
        let table = ShortTokens::new(tokens.iter().map(Vec::as_slice));
        for (id, token) in tokens.iter().enumerate() {
            let key = ShortKey::new(token);
            assert_eq!(key.and_then(|k| table.get(k)), key.map(|_| id as u32));
        }
        assert_eq!(table.get(ShortKey::new(b"t5000").unwrap()), None);

        let mut cache = ShortCache::default();
        for (i, token) in tokens.iter().take(3000).enumerate() {
            let ids: Vec<u32> = (0..(i % 6) as u32 + 1).collect();
            cache.insert(ShortKey::new(token).unwrap(), &ids);
        }
        for (i, token) in tokens.iter().take(3000).enumerate() {
            let ids: Vec<u32> = (0..(i % 6) as u32 + 1).collect();
            assert_eq!(cache.get(ShortKey::new(token).unwrap()), Some(&ids[..]));
        }
        assert_eq!(cache.get(ShortKey::new(b"t4000").unwrap()), None);
    }
}
