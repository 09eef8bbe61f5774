//! The local llama.cpp server for tests.
