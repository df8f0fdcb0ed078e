//! The random inputs of the tests: xorshift64 from a fixed seed, so that
//! every run draws the same inputs and a failure can be replayed.

pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    /// The next number (the seed must not be 0).
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n`.
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}
