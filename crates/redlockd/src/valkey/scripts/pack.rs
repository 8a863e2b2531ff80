//! A batch's arguments as one value: a MessagePack array of strings, which
//! the batch script unpacks with `cmsgpack.unpack` into the table it reads
//! as `ARGV`. Valkey and Redis 6 and later (the oldest the daemon accepts,
//! `crate::valkey::server_info::MIN_VERSION`) ship lua-cmsgpack 0.4, which
//! decodes every `str` form (0.3 lacked `str 8`); the tests check both
//! servers (`tests/tests/packed_arguments.rs`).
//!
//! Why: a master parses each argument of a command separately (a bulk
//! string, then a Lua string in `ARGV`), and a batch of 17 operations
//! carries about a hundred. One value instead spares the master that
//! parsing, and the daemon frames one value instead of a hundred;
//! unpacking has a fixed cost per call that a lone operation's few
//! arguments do not win back, so a batch of one is sent unpacked
//! (`crate::valkey::batch::PACK_FROM`; the figures: docs/benchmarks.md,
//! "One value for a batch's arguments").
//! The keys still travel as `KEYS`: a script must name what it touches.
//!
//! Every element is a string, as `ARGV`'s are: a number is sent as its
//! decimal digits, so the scripts read the same values either way. Strings
//! are sent as MessagePack `str`, whatever their bytes: `cmsgpack` does
//! not check UTF-8, and decodes `str` and `bin` alike.

/// The packed elements of an array under construction, and how many.
#[derive(Debug, Default)]
pub(crate) struct Pack {
    bytes: Vec<u8>,
    count: u32,
}

/// Room an array's header takes: the `array 32` marker and its count, always
/// in that form, whatever the count (MessagePack lets an encoder use a
/// longer form than it needs): one form to write, and to test.
const ARRAY_HEADER: usize = 5;

impl Pack {
    /// An empty array with room for `bytes` bytes of elements.
    pub(crate) fn with_capacity(bytes: usize) -> Pack {
        Pack {
            bytes: Vec::with_capacity(bytes),
            count: 0,
        }
    }

    /// Appends `value` as a string.
    pub(crate) fn push(&mut self, value: &[u8]) {
        let n = value.len();
        // One string longer than 4 GiB cannot be sent to a master anyway
        // (its proto-max-bulk-len is 512 MB): cut rather than panic.
        let n32 = u32::try_from(n).unwrap_or(u32::MAX);
        match n {
            0..=31 => self.bytes.push(0xa0 | n as u8),
            32..=255 => self.bytes.extend_from_slice(&[0xd9, n as u8]),
            256..=65_535 => {
                self.bytes.push(0xda);
                self.bytes.extend_from_slice(&(n as u16).to_be_bytes());
            }
            _ => {
                self.bytes.push(0xdb);
                self.bytes.extend_from_slice(&n32.to_be_bytes());
            }
        }
        self.bytes.extend_from_slice(&value[..n32 as usize]);
        self.count = self.count.saturating_add(1);
    }

    /// Appends `n` as its decimal digits (a string, as `ARGV` holds it).
    pub(crate) fn push_integer(&mut self, n: i64) {
        let mut digits = itoa::Buffer::new();
        self.push(digits.format(n).as_bytes());
    }

    /// The array: its header, then the elements.
    pub(crate) fn finish(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(ARRAY_HEADER + self.bytes.len());
        out.push(0xdd);
        out.extend_from_slice(&self.count.to_be_bytes());
        out.extend_from_slice(&self.bytes);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each string length's form, as the MessagePack spec writes it.
    #[test]
    fn strings_take_the_shortest_str_form() {
        for (len, head) in [
            (0, vec![0xa0]),
            (31, vec![0xbf]),
            (32, vec![0xd9, 32]),
            (255, vec![0xd9, 255]),
            (256, vec![0xda, 1, 0]),
            (65_535, vec![0xda, 0xff, 0xff]),
            (65_536, vec![0xdb, 0, 1, 0, 0]),
        ] {
            let value = vec![b'x'; len];
            let mut pack = Pack::default();
            pack.push(&value);
            let array = pack.finish();
            assert_eq!(&array[..5], &[0xdd, 0, 0, 0, 1], "len {len}");
            assert_eq!(&array[5..5 + head.len()], head.as_slice(), "len {len}");
            assert_eq!(&array[5 + head.len()..], value.as_slice(), "len {len}");
        }
    }

    /// Numbers go as their digits, in order with the strings.
    #[test]
    fn integers_are_digits_in_order() {
        let mut pack = Pack::default();
        pack.push_integer(-12);
        pack.push(b"tok");
        pack.push_integer(2_000_001);
        assert_eq!(
            pack.finish(),
            [
                &[0xdd, 0, 0, 0, 3][..],
                &[0xa3],
                b"-12",
                &[0xa3],
                b"tok",
                &[0xa7],
                b"2000001"
            ]
            .concat()
        );
    }
}
