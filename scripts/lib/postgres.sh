# shellcheck shell=bash
# Throwaway PostgreSQL server for the tests (filled in by the store backends).
pith_postgres_start() { :; }
pith_postgres_stop() { :; }
