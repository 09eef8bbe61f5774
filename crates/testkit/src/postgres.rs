//! The throwaway PostgreSQL server of the test command.
