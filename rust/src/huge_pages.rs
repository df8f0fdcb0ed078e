//! Tables on transparent huge pages, for the encoder's random probes.
//!
//! The encoder probes a few tables of megabytes at random: the token
//! index and the grid of low pairs (made with the model), and each
//! thread's memo of merged pieces (4 MB after 10 MB of English, 16 MB after
//! the multilingual mix) and piece cache (up to 16 MB of records). On 4 KB
//! pages nearly every probe of such a table also misses the TLB. So each
//! of these tables, from 2 MB up, is a mapping of its own, 2 MB-aligned and
//! advised for huge pages (`MADV_HUGEPAGE`) before its first touch: under
//! the usual `madvise` policy it faults in as huge pages, and a few TLB
//! entries cover it. Elsewhere (another OS, a smaller table, a kernel that
//! declines) it is ordinary memory.
//!
//! Why not the whole heap: mimalloc advises all of its memory for huge
//! pages unless built with `no_thp`, as polytok builds it. Then every small
//! allocation that lands in fresh memory faults in and zeroes a whole 2 MB
//! page: a first pass over 10 MB of English took 46 MB of new huge pages
//! for 21 MB of memory it touched, and on a virtual machine the first touch
//! of fresh memory is slow and varies (system time 8-136 ms a pass). With
//! the heap on 4 KB pages and these tables on huge pages, that pass took
//! 8-24 ms of system time every time and ran 1.33x faster, the mix level
//! (both builds at once: `bench/README.md`, session of 2026-12-07, fifth).

use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;

/// The huge page size of x86-64 and of most arm64 kernels. (Off Linux,
/// where nothing is mapped, only the tests read it.)
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
const HUGE_PAGE: usize = 2 << 20;

/// Types whose all-zero bytes are a valid value.
///
/// # Safety
/// Every field must be an integer, an array of integers, or another
/// `Zeroable` type (no references, no niches, no `bool`).
pub(crate) unsafe trait Zeroable: Copy {}

// SAFETY: an integer.
unsafe impl Zeroable for u32 {}

/// A fixed-size table, on huge pages when it is at least one (see the
/// module docs). Dereferences to a slice.
pub(crate) struct HugeTable<T: Copy> {
    ptr: NonNull<T>,
    len: usize,
    /// Whether the memory is a mapping of its own (else from the allocator).
    mapped: bool,
}

// SAFETY: the table owns its elements, like a `Box<[T]>`.
unsafe impl<T: Copy + Send> Send for HugeTable<T> {}
// SAFETY: as above; a shared table only hands out `&[T]`.
unsafe impl<T: Copy + Sync> Sync for HugeTable<T> {}

impl<T: Copy> HugeTable<T> {
    /// `len` copies of `fill`.
    pub(crate) fn filled(len: usize, fill: T) -> Self {
        let table = Self::uninit(len, false);
        for at in 0..len {
            // SAFETY: `at < len`, inside the table's memory.
            unsafe { table.ptr.as_ptr().add(at).write(fill) };
        }
        table
    }

    /// `len` all-zero values: a fresh mapping is zero already, so nothing
    /// is written and each page is faulted in when first probed.
    pub(crate) fn zeroed(len: usize) -> Self
    where
        T: Zeroable,
    {
        Self::uninit(len, true)
    }

    fn layout(len: usize) -> std::alloc::Layout {
        std::alloc::Layout::array::<T>(len).expect("a table that fits in memory")
    }

    /// Room for `len` values, zeroed if `zero`, not otherwise initialized.
    fn uninit(len: usize, zero: bool) -> Self {
        let layout = Self::layout(len);
        if layout.size() == 0 {
            return HugeTable {
                ptr: NonNull::dangling(),
                len,
                mapped: false,
            };
        }
        if let Some(ptr) = map_huge(layout.size()) {
            return HugeTable {
                ptr: ptr.cast(),
                len,
                mapped: true,
            };
        }
        // SAFETY: the layout's size is not zero.
        let raw = unsafe {
            if zero {
                std::alloc::alloc_zeroed(layout)
            } else {
                std::alloc::alloc(layout)
            }
        };
        let Some(ptr) = NonNull::new(raw.cast::<T>()) else {
            std::alloc::handle_alloc_error(layout)
        };
        HugeTable {
            ptr,
            len,
            mapped: false,
        }
    }
}

impl<T: Copy> Clone for HugeTable<T> {
    fn clone(&self) -> Self {
        let mut copy = Self::uninit(self.len, false);
        // SAFETY: `uninit` made room for `len` values (`deref_mut` would
        // read them as initialized); the two tables cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.as_ptr(), copy.ptr.as_mut(), self.len) };
        copy
    }
}

impl<T: Copy> Default for HugeTable<T> {
    fn default() -> Self {
        Self::uninit(0, false)
    }
}

impl<T: Copy> Deref for HugeTable<T> {
    type Target = [T];

    fn deref(&self) -> &[T] {
        // SAFETY: `len` values, all initialized by `filled` or `zeroed`.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> DerefMut for HugeTable<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        // SAFETY: as in `deref`, and `&mut self` is unique.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl<T: Copy> Drop for HugeTable<T> {
    fn drop(&mut self) {
        let layout = Self::layout(self.len);
        if layout.size() == 0 {
            return;
        }
        if self.mapped {
            unmap_huge(self.ptr.cast(), layout.size());
        } else {
            // SAFETY: allocated by `uninit` with this layout.
            unsafe { std::alloc::dealloc(self.ptr.as_ptr().cast(), layout) };
        }
    }
}

/// A zeroed mapping of `size` bytes (at least one huge page), 2 MB-aligned
/// and advised for huge pages; `None` for a smaller size, off Linux, or if
/// the kernel refuses the mapping.
#[cfg(target_os = "linux")]
fn map_huge(size: usize) -> Option<NonNull<u8>> {
    if size < HUGE_PAGE {
        return None;
    }
    let rounded = size.next_multiple_of(HUGE_PAGE);
    // One huge page more than needed, to cut an aligned range out of it.
    let spare = rounded + HUGE_PAGE;
    // SAFETY: an anonymous private mapping at an address of the kernel's
    // choice touches no memory of the program.
    let base = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            spare,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if base == libc::MAP_FAILED {
        return None;
    }
    let start = (base as usize).next_multiple_of(HUGE_PAGE);
    let (head, tail) = (
        start - base as usize,
        base as usize + spare - (start + rounded),
    );
    // SAFETY: the head and the tail are parts of the mapping just made
    // that the table will not use. Unmapping them cannot fail but for bad
    // arguments; the advice is a hint, and its refusal leaves 4 KB pages.
    unsafe {
        if head > 0 {
            libc::munmap(base, head);
        }
        if tail > 0 {
            libc::munmap((start + rounded) as *mut libc::c_void, tail);
        }
        libc::madvise(start as *mut libc::c_void, rounded, libc::MADV_HUGEPAGE);
    }
    NonNull::new(start as *mut u8)
}

#[cfg(not(target_os = "linux"))]
fn map_huge(_size: usize) -> Option<NonNull<u8>> {
    None
}

#[cfg(target_os = "linux")]
fn unmap_huge(ptr: NonNull<u8>, size: usize) {
    // SAFETY: the range `map_huge` returned for this size, unmapped once.
    unsafe { libc::munmap(ptr.as_ptr().cast(), size.next_multiple_of(HUGE_PAGE)) };
}

#[cfg(not(target_os = "linux"))]
fn unmap_huge(_ptr: NonNull<u8>, _size: usize) {
    unreachable!("nothing is mapped off Linux")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_of_every_size_hold_what_is_written() {
        for len in [
            0,
            1,
            1000,
            HUGE_PAGE / 8 - 1,
            HUGE_PAGE / 8,
            3 * HUGE_PAGE / 8 + 5,
        ] {
            let mut table = HugeTable::filled(len, 7u64);
            assert_eq!(table.len(), len);
            assert!(table.iter().all(|&v| v == 7));
            if len > 0 {
                table[len - 1] = 9;
                assert_eq!(table[len - 1], 9);
            }
            assert_eq!(
                table.mapped,
                cfg!(target_os = "linux") && len * 8 >= HUGE_PAGE
            );
            if table.mapped {
                assert_eq!(table.as_ptr() as usize % HUGE_PAGE, 0);
                assert!(advised_huge(table.as_ptr() as usize), "no MADV_HUGEPAGE");
            }
            let copy = table.clone();
            assert_eq!(&copy[..], &table[..]);
            assert_eq!(copy.mapped, table.mapped);
        }
    }

    /// Whether the mapping at `address` carries `MADV_HUGEPAGE` (`hg` in
    /// its `VmFlags`, `/proc/self/smaps`).
    #[cfg(target_os = "linux")]
    fn advised_huge(address: usize) -> bool {
        let smaps = std::fs::read_to_string("/proc/self/smaps").expect("smaps");
        let mut inside = false;
        for line in smaps.lines() {
            let range = line.split_whitespace().next().unwrap_or("");
            if let Some((start, end)) = range.split_once('-') {
                if let (Ok(start), Ok(end)) = (
                    usize::from_str_radix(start, 16),
                    usize::from_str_radix(end, 16),
                ) {
                    inside = (start..end).contains(&address);
                    continue;
                }
            }
            if inside && line.starts_with("VmFlags:") {
                return line.split_whitespace().any(|flag| flag == "hg");
            }
        }
        false
    }

    #[cfg(not(target_os = "linux"))]
    fn advised_huge(_address: usize) -> bool {
        unreachable!("nothing is mapped off Linux")
    }

    #[derive(Clone, Copy)]
    struct Pair(u64, u32);
    // SAFETY: integers only.
    unsafe impl Zeroable for Pair {}

    #[test]
    fn zeroed_tables_are_zero_on_and_off_huge_pages() {
        for len in [0, 3, HUGE_PAGE / 16 + 1] {
            let mut table = HugeTable::<Pair>::zeroed(len);
            assert!(table.iter().all(|p| p.0 == 0 && p.1 == 0));
            for (at, p) in table.iter_mut().enumerate() {
                *p = Pair(at as u64, 1);
            }
            assert!(table
                .iter()
                .enumerate()
                .all(|(at, p)| p.0 == at as u64 && p.1 == 1));
        }
        assert!(HugeTable::<Pair>::default().is_empty());
    }
}
