//! The compact JSON text of tool arguments, measured and written as serde_json writes it.
//!
//! Tool arguments can hold whole file bodies, and a planning pass both measures every argument of
//! the view and writes those of the summarised span: [`json_len`] counts the escapes without
//! writing, [`push_json`] escapes into the caller's string without intermediate copies.

/// Whether serde_json escapes this byte inside a string.
#[inline]
fn needs_escape(b: u8) -> bool {
    // Bitwise, not short-circuit: the callers' loops vectorise.
    (b < 0x20) | (b == b'"') | (b == b'\\')
}

/// Whether serde_json escapes this byte as `\u00XX` (six bytes) rather than a short escape.
#[inline]
fn long_escape(b: u8) -> bool {
    (b < 0x20) & (b != 0x08) & (b != 0x09) & (b != 0x0a) & (b != 0x0c) & (b != 0x0d)
}

/// Bytes of `value` in serde_json's compact form.
pub(super) fn json_len(value: &serde_json::Value) -> usize {
    use serde_json::Value;
    match value {
        Value::Null | Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(n) => {
            let mut sink = ByteCount(0);
            // Writing to a counter cannot fail; a failure would leave a count of the bytes so far.
            let _ = serde_json::to_writer(&mut sink, n);
            sink.0
        }
        Value::String(s) => json_str_len(s),
        Value::Array(items) => 2 + items.len().saturating_sub(1) + items.iter().map(json_len).sum::<usize>(),
        Value::Object(map) => {
            2 + map.len().saturating_sub(1)
                + map
                    .iter()
                    .map(|(k, v)| json_str_len(k) + 1 + json_len(v))
                    .sum::<usize>()
        }
    }
}

/// Bytes of `s` as a JSON string literal: quotes, and two bytes for each short escape
/// (`\"`, `\\`, `\n`, ...) or six for a `\u00XX` one.
fn json_str_len(s: &str) -> usize {
    // Sixteen byte-wide counters, one per lane of a row of sixteen bytes, summed every
    // `COUNT_ROWS` rows before they can overflow: fixed-size, branch-free arithmetic that compiles
    // to vector compares and adds. This runs over whole file bodies.
    let (rows, tail) = s.as_bytes().as_chunks::<16>();
    let mut extra = 0usize;
    for block in rows.chunks(COUNT_ROWS) {
        let mut lanes = [0u8; 16];
        for row in block {
            for (lane, &b) in lanes.iter_mut().zip(row) {
                *lane += escape_extra(b);
            }
        }
        extra += lanes.iter().map(|&n| u32::from(n)).sum::<u32>() as usize;
    }
    extra += tail.iter().map(|&b| u32::from(escape_extra(b))).sum::<u32>() as usize;
    s.len() + 2 + extra
}

/// Rows of sixteen bytes [`json_str_len`] counts before summing its byte-wide counters: each byte
/// adds at most 5, so 51 rows would still fit in a `u8`.
const COUNT_ROWS: usize = 48;

/// Bytes the escape of `b` adds to it: 0, 1 for a short escape, 5 for a `\u00XX` one.
#[inline]
fn escape_extra(b: u8) -> u8 {
    u8::from(needs_escape(b)) + 4 * u8::from(long_escape(b))
}

/// Appends `value` in serde_json's compact form.
pub(super) fn push_json(out: &mut String, value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(n) => match serde_json::to_string(n) {
            Ok(text) => out.push_str(&text),
            Err(_) => out.push_str(&n.to_string()),
        },
        Value::String(s) => push_json_str(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                push_json_str(out, k);
                out.push(':');
                push_json(out, v);
            }
            out.push('}');
        }
    }
}

/// Appends `s` as a JSON string literal, escaped as serde_json escapes it.
///
/// File bodies in edit and write calls hold a byte to escape every few dozen bytes (line ends,
/// quotes). The text is escaped into a stack buffer eight bytes at a time, at a fixed stride, so
/// that no word waits for the previous one: each word's bytes to escape are found exactly with
/// word arithmetic ([`escape_bits`]), the word is stored whole, and for each byte to escape (most
/// words have none) its escape is written in place and the rest of the word stored again after
/// it. The buffer is appended to `out` every [`ESCAPE_CHUNK`] bytes, at a character boundary of
/// `s`, so that it always holds whole characters.
fn push_json_str(out: &mut String, s: &str) {
    let bytes = s.as_bytes();
    out.reserve(s.len() + 2);
    out.push('"');
    let mut buf = [0u8; ESCAPE_CHUNK + 128];
    let mut n = 0;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if n >= ESCAPE_CHUNK {
            // A continuation byte (0b10xx_xxxx) is inside a character: copy up to the next start.
            if b & 0xc0 == 0x80 {
                buf[n] = b;
                n += 1;
                i += 1;
            } else {
                flush_escaped(out, &buf[..n]);
                n = 0;
            }
            continue;
        }
        let Some(word) = bytes.get(i..i + 8) else {
            // The last few bytes, one at a time.
            if needs_escape(b) {
                n += write_escape(&mut buf[n..], b);
            } else {
                buf[n] = b;
                n += 1;
            }
            i += 1;
            continue;
        };
        let mut le = [0u8; 8];
        le.copy_from_slice(word);
        let word = u64::from_le_bytes(le);
        buf[n..n + 8].copy_from_slice(&le);
        let mut flagged = escape_bits(word);
        // `at`: where byte `from` of the word sits in the buffer.
        let (mut at, mut from) = (n, 0usize);
        while flagged != 0 {
            let j = (flagged.trailing_zeros() / 8) as usize;
            flagged &= flagged - 1;
            let pos = at + (j - from);
            let written = write_escape(&mut buf[pos..], le[j]);
            // The rest of the word after the escaped byte.
            let rest = (word >> (8 * j)) >> 8;
            buf[pos + written..pos + written + 8].copy_from_slice(&rest.to_le_bytes());
            at = pos + written;
            from = j + 1;
        }
        n = at + (8 - from);
        i += 8;
    }
    flush_escaped(out, &buf[..n]);
    out.push('"');
}

/// High bit set in exactly the bytes of the little-endian word `x` that JSON escapes (below
/// 0x20, `"` and `\\`): each test is an exact zero-byte test, free of carries between bytes.
#[inline]
fn escape_bits(x: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const ONES: u64 = 0x0101_0101_0101_0101;
    /// High bit set in each zero byte of `y`.
    fn zero_bytes(y: u64) -> u64 {
        !(((y & LOW7) + LOW7) | y | LOW7)
    }
    zero_bytes(x & (ONES * 0xe0))
        | zero_bytes(x ^ (ONES * u64::from(b'"')))
        | zero_bytes(x ^ (ONES * u64::from(b'\\')))
}

/// Bytes escaped into the stack buffer of [`push_json_str`] before it is appended.
const ESCAPE_CHUNK: usize = 1024;

/// The letter of each byte's short escape (`\n` → `n`, ...); 0 for the rest.
static SHORT_ESCAPES: [u8; 256] = {
    let mut table = [0u8; 256];
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table[b'\n' as usize] = b'n';
    table[b'\r' as usize] = b'r';
    table[b'\t' as usize] = b't';
    table[0x08] = b'b';
    table[0x0c] = b'f';
    table
};

/// Appends escaped text that holds whole characters (it always does; a lossy copy otherwise).
fn flush_escaped(out: &mut String, escaped: &[u8]) {
    match std::str::from_utf8(escaped) {
        Ok(text) => out.push_str(text),
        Err(_) => out.push_str(&String::from_utf8_lossy(escaped)),
    }
}

/// Writes the escape of `b` (a byte [`needs_escape`] flags) at the start of `buf`; its length.
fn write_escape(buf: &mut [u8], b: u8) -> usize {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match SHORT_ESCAPES[usize::from(b)] {
        0 => {
            let long = [
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xf)],
            ];
            buf[..6].copy_from_slice(&long);
            6
        }
        short => {
            buf[..2].copy_from_slice(&[b'\\', short]);
            2
        }
    }
}

/// An `io::Write` that keeps only the number of bytes written.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0 += buf.len();
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
