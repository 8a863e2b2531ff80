//! A fixed-capacity vector kept inline, so that a state is one flat value:
//! the checker clones and hashes millions of states, and a `Vec` in each
//! would cost an allocation per clone.

/// Up to `N` items of `T`, inline. Unused slots always hold
/// `T::default()`, so the derived comparisons and hash see only the items.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Small<T, const N: usize> {
    len: u8,
    items: [T; N],
}

impl<T: Copy + Default, const N: usize> Default for Small<T, N> {
    fn default() -> Self {
        Small {
            len: 0,
            items: [T::default(); N],
        }
    }
}

impl<T: Copy + Default + Ord, const N: usize> Small<T, N> {
    /// The items.
    pub fn as_slice(&self) -> &[T] {
        &self.items[..usize::from(self.len)]
    }

    /// The items, to change in place.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.items[..usize::from(self.len)]
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first item.
    pub fn first(&self) -> Option<T> {
        self.as_slice().first().copied()
    }

    /// The last item.
    pub fn last(&self) -> Option<T> {
        self.as_slice().last().copied()
    }

    /// Adds `item` at the end.
    pub fn push(&mut self, item: T) {
        let at = usize::from(self.len);
        assert!(at < N, "a Small<_, {N}> overflowed: raise its capacity");
        self.items[at] = item;
        self.len += 1;
    }

    /// Removes and returns the item at `at`, keeping the order.
    pub fn remove(&mut self, at: usize) -> T {
        let item = self.as_slice()[at];
        let len = usize::from(self.len);
        self.items.copy_within(at + 1..len, at);
        self.items[len - 1] = T::default();
        self.len -= 1;
        item
    }

    /// Removes the last item.
    pub fn pop(&mut self) -> Option<T> {
        let last = usize::from(self.len).checked_sub(1)?;
        Some(self.remove(last))
    }

    /// Keeps only the items `keep` says yes to.
    pub fn retain(&mut self, keep: impl Fn(&T) -> bool) {
        let mut at = 0;
        while at < usize::from(self.len) {
            match keep(&self.as_slice()[at]) {
                true => at += 1,
                false => {
                    self.remove(at);
                }
            }
        }
    }

    /// Sorts the items.
    pub fn sort(&mut self) {
        self.as_mut_slice().sort_unstable();
    }

    /// Removes every item.
    pub fn clear(&mut self) {
        *self = Small::default();
    }
}

impl<T: Copy + Default + Ord + std::fmt::Debug, const N: usize> std::fmt::Debug for Small<T, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}
