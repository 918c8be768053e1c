//! The journal stores' integration tests: one test binary, a module per backend and suite
//! (SQLite, Postgres, Postgres through PgBouncer).

mod pg_support;
mod pgbouncer_conformance;
mod postgres_backend;
mod postgres_conformance;
mod sqlite_backend;
mod sqlite_bench;
mod sqlite_conformance;
