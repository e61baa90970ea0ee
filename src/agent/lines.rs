//! The one bounded line splitter every reader of agent output uses: bytes cut
//! anywhere in, whole lines out, never more than a cap of one line held.

/// Longest part of one line kept in memory; the rest of a longer line is dropped.
pub(crate) const MAX_LINE_BYTES: usize = 1 << 20;

/// Splits a byte stream fed in any chunks into lines (without the `\n`), each
/// with whether it lost bytes past [`MAX_LINE_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct LineSplitter {
    /// Start of a line that continues in a later chunk (at most the cap).
    pending: Vec<u8>,
    /// The pending line has lost bytes past the cap.
    truncated: bool,
}

impl LineSplitter {
    /// Hands every line completed by `chunk` to `line`; keeps the rest.
    pub(crate) fn feed(&mut self, mut chunk: &[u8], mut line: impl FnMut(&[u8], bool)) {
        while let Some(i) = memchr::memchr(b'\n', chunk) {
            let (head, rest) = chunk.split_at(i);
            if self.pending.is_empty() && !self.truncated {
                // Common case: the whole line is in this chunk, no copy needed.
                let keep = head.len().min(MAX_LINE_BYTES);
                line(&head[..keep], head.len() > keep);
            } else {
                self.append(head);
                let truncated = std::mem::replace(&mut self.truncated, false);
                line(&self.pending, truncated);
                self.pending.clear();
                // Do not sit on a megabyte after one huge line.
                self.pending.shrink_to(64 * 1024);
            }
            chunk = &rest[1..];
        }
        self.append(chunk);
    }

    /// End of the stream: a last line without a newline is a line too.
    pub(crate) fn finish(&mut self, mut line: impl FnMut(&[u8], bool)) {
        if !self.pending.is_empty() || self.truncated {
            let truncated = std::mem::replace(&mut self.truncated, false);
            line(&self.pending, truncated);
            self.pending = Vec::new();
        }
    }

    /// Bytes held for the unfinished line (bounded by the cap).
    #[cfg(test)]
    pub(crate) fn capacity(&self) -> usize {
        self.pending.capacity()
    }

    /// Bytes of the unfinished line held.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.pending.len()
    }

    /// The unfinished line has lost bytes past the cap.
    #[cfg(test)]
    pub(crate) fn is_truncated(&self) -> bool {
        self.truncated
    }

    /// Buffers part of an unfinished line without ever growing past the cap
    /// (plain `extend` may double the allocation beyond it).
    fn append(&mut self, data: &[u8]) {
        let room = MAX_LINE_BYTES - self.pending.len();
        let take = data.len().min(room);
        if take < data.len() {
            self.truncated = true;
        }
        if take == 0 {
            return;
        }
        let needed = self.pending.len() + take;
        if needed > self.pending.capacity() {
            let target = needed
                .max(self.pending.capacity().saturating_mul(2))
                .min(MAX_LINE_BYTES);
            self.pending.reserve_exact(target - self.pending.len());
        }
        self.pending.extend_from_slice(&data[..take]);
    }
}
