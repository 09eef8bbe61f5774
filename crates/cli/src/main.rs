//! The `pith` command-line tool.
fn main() {}
