//! Streaming reads keep memory bounded by the largest record, not the file.
//!
//! A counting global allocator (`peak_alloc`) measures the peak of live heap bytes while
//! importing. This file holds a single test so no other test allocates concurrently.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use peak_alloc::PeakAlloc;

#[global_allocator]
static ALLOC: PeakAlloc = PeakAlloc;

const MB: usize = 1024 * 1024;

fn progress_line(i: usize, size: usize) -> String {
    format!(
        "{{\"type\":\"progress\",\"sessionId\":\"s\",\"uuid\":\"p{i}\",\"data\":\"{}\"}}\n",
        "x".repeat(size)
    )
}

#[test]
fn memory_is_bounded_by_the_longest_line_not_the_file() {
    let dir = tempfile::tempdir().unwrap();

    // 1. One 50 MB line: a user message whose text is 50 MB. It imports whole.
    let big = dir.path().join("big.jsonl");
    let big_line_len = {
        let text = "y".repeat(50 * MB);
        let line = format!(
            "{{\"type\":\"user\",\"sessionId\":\"s\",\"uuid\":\"u\",\"message\":{{\"role\":\"user\",\"content\":\"{text}\"}}}}\n"
        );
        std::fs::write(&big, &line).unwrap();
        line.len()
    };
    let s = pith_import::import_file(&big).unwrap();
    assert_eq!(s.report.max_line_bytes as usize, big_line_len);
    let first = s.messages().next().unwrap();
    assert_eq!(first.text_content().len(), 50 * MB);
    drop(s);

    // 2. A 200 MB file of ten 20 MB lines that never reach the model, around one small message:
    //    the peak of live heap bytes stays near a few times one line, far below the file.
    let wide = dir.path().join("wide.jsonl");
    {
        use std::io::Write;
        let mut f = std::io::BufWriter::new(std::fs::File::create(&wide).unwrap());
        f.write_all(
            b"{\"type\":\"user\",\"sessionId\":\"s\",\"uuid\":\"u\",\"message\":{\"content\":\"hi\"}}\n",
        )
        .unwrap();
        for i in 0..10 {
            f.write_all(progress_line(i, 20 * MB).as_bytes()).unwrap();
        }
        f.flush().unwrap();
    }
    let file_size = std::fs::metadata(&wide).unwrap().len() as usize;
    let base = ALLOC.current_usage();
    ALLOC.reset_peak_usage();
    let s = pith_import::import_file(&wide).unwrap();
    let peak = ALLOC.peak_usage() - base;
    assert_eq!(s.report.skipped.get("progress"), Some(&10));
    assert_eq!(s.messages().count(), 1);
    let line = s.report.max_line_bytes as usize;
    assert!(line > 20 * MB && line < 21 * MB, "longest line {line}");
    assert!(peak < 3 * line, "peak {peak} bytes for a {line}-byte line");
    assert!(
        peak < file_size / 3,
        "peak {peak} bytes for a {file_size}-byte file"
    );
    eprintln!("file {file_size} bytes, longest line {line} bytes, peak heap {peak} bytes");
}
