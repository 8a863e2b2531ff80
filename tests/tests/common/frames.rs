//! Raw HTTP/2, for the tests that must send what no HTTP/2 library sends
//! on purpose (a flood past the announced limits, DATA after a reset):
//! frame types and flags (RFC 9113 section 6), one frame's bytes, and a
//! header block of plain literals.

// Compiled into every test binary that declares `mod common`; used by few.
#![allow(dead_code)]

/// The client connection preface, before its first SETTINGS.
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub(crate) const DATA: u8 = 0x0;
pub(crate) const HEADERS: u8 = 0x1;
pub(crate) const RST_STREAM: u8 = 0x3;
pub(crate) const SETTINGS: u8 = 0x4;
pub(crate) const PING: u8 = 0x6;
pub(crate) const GOAWAY: u8 = 0x7;
pub(crate) const END_STREAM: u8 = 0x1;
pub(crate) const ACK: u8 = 0x1;
pub(crate) const END_HEADERS: u8 = 0x4;

/// Appends one frame to `out`.
pub(crate) fn put_frame(out: &mut Vec<u8>, kind: u8, flags: u8, stream: u32, payload: &[u8]) {
    let len = u32::try_from(payload.len()).expect("small frame");
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// A HPACK header block of literal fields without indexing (RFC 7541
/// section 6.2.2), every string shorter than 127 bytes and not
/// Huffman-coded.
pub(crate) fn header_block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut block = Vec::new();
    for (name, value) in fields {
        block.push(0x00);
        for s in [name, value] {
            block.push(u8::try_from(s.len()).expect("short string"));
            block.extend_from_slice(s.as_bytes());
        }
    }
    block
}
