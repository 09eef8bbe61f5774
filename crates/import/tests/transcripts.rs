//! Every shared transcript imports, is detected as its manifest format, and yields the same
//! numbers of user messages, assistant messages, tool calls and tool results as an independent
//! count of the raw file.
//!
//! The counts here come from a separate, deliberately minimal walk of each raw file with
//! `serde_json::Value` (or plain line matching for aider); nothing of the importer is called.
//! The fidelity rules of docs/FORMATS.md are applied explicitly:
//! - reminders are counted as user messages, and also separately;
//! - synthesised error results (calls never answered) are counted apart from real results;
//! - pi's `bashExecution` counts as one (synthetic) assistant message, one call and one result;
//! - text actions (mini-SWE-agent bash blocks, SWE-agent text commands) count as calls, and the
//!   observation after them as a result, not a user message.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod counts;

use counts::{
    count_aider, count_claude, count_codex, count_mini, count_openhands, count_pi, count_swe_agent, Counts,
};
use pith_core::{Entry, MarkerKind, Role};
use pith_import::{Format, ImportedSession};

/// The same counts, from the imported log.
fn imported_counts(s: &ImportedSession) -> Counts {
    let mut c = Counts {
        dropped_results: s.report.dropped_results,
        ..Counts::default()
    };
    for e in &s.entries {
        match e {
            Entry::Message(m) => {
                match m.role {
                    Role::User => {
                        c.user += 1;
                        c.reminders += u64::from(m.is_reminder());
                        c.external_summaries += u64::from(m.meta.external_summary);
                    }
                    Role::Assistant => c.assistant += 1,
                    _ => {}
                }
                c.calls += m.tool_calls().count() as u64;
                let results = m.tool_results().count() as u64;
                if m.meta.synthetic {
                    c.synthesized_results += results;
                } else {
                    c.results += results;
                }
            }
            Entry::Marker(marker) => {
                assert!(matches!(marker.kind, MarkerKind::ExternalCompaction { .. }));
                c.markers += 1;
            }
            _ => {}
        }
    }
    c
}

#[test]
fn every_shared_transcript_imports_with_independently_counted_messages() {
    let Some(files) = pith_testkit::transcripts::manifest() else {
        return;
    };
    assert!(!files.is_empty());
    for (path, entry) in files {
        let expected_format: Format = entry.format.parse().unwrap();
        let session = pith_import::import_file(&path).unwrap_or_else(|e| panic!("{}: {e}", entry.file));
        assert_eq!(session.format, expected_format, "{}", entry.file);
        pith_import::validate(&session.entries).unwrap();
        let expected = match expected_format {
            Format::ClaudeCode => count_claude(&path),
            Format::Codex => count_codex(&path),
            Format::Pi => count_pi(&path),
            Format::SweAgent => count_swe_agent(&path),
            Format::MiniSweAgent => count_mini(&path),
            Format::OpenHands => count_openhands(&path),
            Format::Aider => count_aider(&path),
            other => panic!("no independent counter for {other}"),
        };
        let got = imported_counts(&session);
        assert_eq!(got, expected, "{}", entry.file);
        assert!(
            expected.user + expected.assistant > 0,
            "{} has no messages",
            entry.file
        );
        assert_eq!(
            session.report.synthesized_results, expected.synthesized_results,
            "{}",
            entry.file
        );
    }
}

#[test]
fn detection_from_the_first_bytes_matches_the_manifest() {
    let Some(files) = pith_testkit::transcripts::manifest() else {
        return;
    };
    for (path, entry) in files {
        let bytes = std::fs::read(&path).unwrap();
        let head = &bytes[..bytes.len().min(pith_import::HEAD_BYTES)];
        // Detection reads content; a neutral name keeps the file name from helping.
        let detected = pith_import::detect("input", head).unwrap_or_else(|e| panic!("{}: {e}", entry.file));
        assert_eq!(
            detected,
            entry.format.parse::<Format>().unwrap(),
            "{}",
            entry.file
        );
    }
}
