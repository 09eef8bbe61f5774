//! A seeded generator of long, realistic coding-agent sessions.
//!
//! The demo needs a session that looks like real work without shipping anyone's data: user requests
//! and constraints, parallel file reads with large outputs, edits, test runs that fail and then
//! pass, and a final answer per request. The same seed always yields the same session.

use pith_core::{Entry, Message, Part, Role, SessionRecord, ToolDeclaration};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;

/// The system instruction of generated sessions.
pub const SYSTEM_PROMPT: &str = "You are a careful coding agent working in the repository \
/work/acme-billing. Read before you edit, run the tests after every change, and never change a \
public function signature unless the user asks for it.";

const MODULES: &[&str] = &[
    "src/invoice.rs",
    "src/tax.rs",
    "src/ledger.rs",
    "src/currency.rs",
    "src/customer.rs",
    "src/report/monthly.rs",
    "src/report/export_csv.rs",
    "src/api/handlers.rs",
    "src/api/routes.rs",
    "src/db/migrations.rs",
    "tests/invoice_totals.rs",
    "tests/tax_rounding.rs",
];

const REQUESTS: &[&str] = &[
    "Invoice totals are off by one cent when a discount applies. Find out why and fix it.",
    "Add VAT support for Germany (19%) and Austria (20%) to the tax module.",
    "The monthly report crashes on customers without a billing address. Make it skip them and log a warning.",
    "Export the ledger as CSV with a header row; the accountants need semicolons as separators.",
    "Rounding must be banker's rounding everywhere money is computed. Audit the code and change it.",
    "Add an endpoint GET /invoices/{id}/pdf that returns 501 for now, with a test.",
    "Customers in Switzerland are billed in CHF; make currency conversion use the daily rate table.",
    "Speed up the ledger balance query; it scans the whole table for every customer.",
    "Write a migration that adds a nullable `vat_id` column to customers.",
    "Make the CSV export stream rows instead of building the whole file in memory.",
];

const CONSTRAINTS: &[&str] = &[
    "Constraint: do not touch src/db/migrations.rs without asking me first.",
    "Constraint: keep the public API of invoice.rs unchanged; other teams depend on it.",
    "Preference: use only the standard library, no new crates.",
    "Constraint: all amounts are integer cents (i64), never floats.",
    "Preference: keep functions under 40 lines and add a doc comment to each new one.",
];

/// The tool declarations of generated sessions.
pub fn tools() -> Vec<ToolDeclaration> {
    let decl = |name: &str, description: &str, params: serde_json::Value| ToolDeclaration {
        name: name.into(),
        description: description.into(),
        parameters: params,
    };
    vec![
        decl(
            "read_file",
            "Read a file of the repository.",
            json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
        ),
        decl(
            "edit_file",
            "Replace a unique snippet of a file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "old": {"type": "string"}, "new": {"type": "string"}}, "required": ["path", "old", "new"]}),
        ),
        decl(
            "write_file",
            "Create or overwrite a file.",
            json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]}),
        ),
        decl(
            "bash",
            "Run a shell command in the repository.",
            json!({"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
        ),
    ]
}

/// A generated session: its record and its log, in order.
#[derive(Debug, Clone)]
pub struct GeneratedSession {
    /// The session record (model and tools).
    pub record: SessionRecord,
    /// The log: the system instruction, then user requests, assistant messages and tool results.
    pub entries: Vec<Entry>,
}

struct Gen {
    rng: StdRng,
    call: u32,
    entries: Vec<Entry>,
}

impl Gen {
    fn call_id(&mut self) -> String {
        self.call += 1;
        format!("call_{:04}", self.call)
    }

    fn push(&mut self, message: Message) {
        self.entries.push(Entry::Message(message));
    }

    fn file_body(&mut self, path: &str) -> String {
        let lines = self.rng.gen_range(120..420);
        let mut out = String::with_capacity(lines * 48);
        let stem = path.rsplit('/').next().unwrap_or(path).trim_end_matches(".rs");
        for i in 0..lines {
            let line = match i % 9 {
                0 => format!("/// Computes the {stem} value for row {i}.\n"),
                1 => format!("pub fn {stem}_step_{i}(amount_cents: i64, rate_bp: i64) -> i64 {{\n"),
                2 => format!("    let scaled = amount_cents * rate_bp / 10_000; // line {i}\n"),
                3 => "    if scaled < 0 {\n        return 0;\n    }\n".to_string(),
                4 => format!("    tracing::debug!(amount_cents, rate_bp, \"{stem} step {i}\");\n"),
                5 => "    scaled\n}\n".to_string(),
                6 => format!("const LIMIT_{i}: i64 = {};\n", self.rng.gen_range(100..100_000)),
                7 => "\n".to_string(),
                _ => format!("// TODO({}) revisit rounding here\n", self.rng.gen_range(1..99)),
            };
            out.push_str(&line);
        }
        out
    }

    fn test_output(&mut self, failing: bool) -> String {
        let total = self.rng.gen_range(40..90);
        let mut out = String::from(
            "   Compiling acme-billing v0.3.1 (/work/acme-billing)\n    Finished test profile\n",
        );
        out.push_str(&format!("running {total} tests\n"));
        for i in 0..total {
            out.push_str(&format!("test invoice::tests::case_{i:03} ... ok\n"));
        }
        if failing {
            let case = self.rng.gen_range(0..total);
            out.push_str(&format!(
                "test invoice_totals::discount_rounding_{case} ... FAILED\n\nfailures:\n\n---- \
                 invoice_totals::discount_rounding_{case} stdout ----\nthread 'main' panicked at \
                 tests/invoice_totals.rs:{}:9:\nassertion `left == right` failed\n  left: 1999\n \
                 right: 2000\n\ntest result: FAILED. {} passed; 1 failed\nerror: test failed, to rerun \
                 pass `--test invoice_totals`\n",
                self.rng.gen_range(10..300),
                total - 1
            ));
        } else {
            out.push_str(&format!("\ntest result: ok. {total} passed; 0 failed\n"));
        }
        out
    }

    fn turn(&mut self, request: &str, constraint: Option<&str>) {
        let mut text = request.to_string();
        if let Some(c) = constraint {
            text.push_str("\n\n");
            text.push_str(c);
        }
        self.push(Message::user(text));

        // Parallel reads of two or three files.
        let reads = self.rng.gen_range(2..=3);
        let mut calls = Vec::new();
        let mut parts = vec![Part::text("Let me read the relevant code first.")];
        for _ in 0..reads {
            let path = MODULES[self.rng.gen_range(0..MODULES.len())];
            let id = self.call_id();
            parts.push(Part::ToolCall {
                call_id: id.clone(),
                name: "read_file".into(),
                arguments: json!({"path": path}),
            });
            calls.push((id, path));
        }
        self.push(Message::new(Role::Assistant, parts));
        for (id, path) in calls {
            let body = self.file_body(path);
            self.push(Message::tool_result(id, body, false));
        }

        // An edit, a failing test run, a fix, a passing run.
        let path = MODULES[self.rng.gen_range(0..MODULES.len())];
        let id = self.call_id();
        self.push(Message::new(
            Role::Assistant,
            vec![
                Part::text(format!("The problem is in {path}; applying the change.")),
                Part::ToolCall {
                    call_id: id.clone(),
                    name: "edit_file".into(),
                    arguments: json!({"path": path, "old": "amount_cents * rate_bp / 10_000", "new": "(amount_cents * rate_bp + 5_000) / 10_000"}),
                },
            ],
        ));
        self.push(Message::tool_result(
            id,
            format!("Edited {path}: 1 replacement."),
            false,
        ));
        let fail = self.rng.gen_bool(0.7);
        let id = self.call_id();
        self.push(Message::new(
            Role::Assistant,
            vec![Part::ToolCall {
                call_id: id.clone(),
                name: "bash".into(),
                arguments: json!({"command": "cargo test"}),
            }],
        ));
        let out = self.test_output(fail);
        self.push(Message::tool_result(id, out, fail));
        if fail {
            let id = self.call_id();
            self.push(Message::new(
                Role::Assistant,
                vec![
                    Part::text("One rounding case still fails; adjusting the half-cent handling."),
                    Part::ToolCall {
                        call_id: id.clone(),
                        name: "edit_file".into(),
                        arguments: json!({"path": "src/currency.rs", "old": "round_half_up", "new": "round_half_even"}),
                    },
                ],
            ));
            self.push(Message::tool_result(
                id,
                "Edited src/currency.rs: 1 replacement.",
                false,
            ));
            let id = self.call_id();
            self.push(Message::new(
                Role::Assistant,
                vec![Part::ToolCall {
                    call_id: id.clone(),
                    name: "bash".into(),
                    arguments: json!({"command": "cargo test"}),
                }],
            ));
            let out = self.test_output(false);
            self.push(Message::tool_result(id, out, false));
        }
        self.push(Message::assistant(format!(
            "Done: changed {path}{}. All tests pass.",
            if fail { " and src/currency.rs" } else { "" }
        )));
    }
}

/// Generates a session of `turns` user requests with the given seed.
pub fn generate(seed: u64, turns: usize, model: &str) -> GeneratedSession {
    let mut g = Gen {
        rng: StdRng::seed_from_u64(seed),
        call: 0,
        entries: Vec::new(),
    };
    g.push(Message::system(SYSTEM_PROMPT));
    for t in 0..turns {
        let request = REQUESTS[t % REQUESTS.len()];
        let constraint = (t % 3 == 0).then(|| CONSTRAINTS[(t / 3) % CONSTRAINTS.len()]);
        g.turn(request, constraint);
    }
    GeneratedSession {
        record: SessionRecord::new(model, tools()),
        entries: g.entries,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_session_and_every_call_answered() {
        let a = generate(7, 6, "scripted/demo");
        let b = generate(7, 6, "scripted/demo");
        let text = |s: &GeneratedSession| {
            s.entries
                .iter()
                .filter_map(Entry::as_message)
                .map(|m| format!("{:?}", m.parts))
                .collect::<Vec<_>>()
        };
        assert_eq!(text(&a), text(&b));
        let calls: Vec<String> = a
            .entries
            .iter()
            .filter_map(Entry::as_message)
            .flat_map(|m| {
                m.tool_calls()
                    .map(|(id, _, _)| id.to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        let results: Vec<String> = a
            .entries
            .iter()
            .filter_map(Entry::as_message)
            .flat_map(|m| {
                m.tool_results()
                    .map(|(id, _, _)| id.to_string())
                    .collect::<Vec<_>>()
            })
            .collect();
        assert_eq!(calls, results);
        assert!(a
            .entries
            .iter()
            .filter_map(Entry::as_message)
            .any(|m| m.tool_calls().count() >= 2));
    }
}
