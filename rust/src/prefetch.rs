//! Asking the CPU to fetch a cache line ahead of its use: the hash tables of
//! encoding and counting are probed at random, and a batch of probes whose
//! lines are fetched together waits on memory once instead of once each.

/// Starts fetching the line of `item` into the cache. It changes nothing
/// the program computes and cannot fault; a no-op off x86-64.
#[inline(always)]
pub(crate) fn line<T>(item: &T) {
    address(item as *const T);
}

/// Starts fetching the line at `address`, which need not be valid (an
/// object that Python owns, say).
#[inline(always)]
pub(crate) fn address<T>(address: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint: it reads nothing the program sees
    // and cannot fault, whatever the address.
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>(address.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}
