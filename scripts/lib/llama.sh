# shellcheck shell=bash
# Local llama.cpp server runtime for the tests (filled in by the router).
pith_llama_setup() { :; }
