//! The tideway binary's library half: configuration loading and server
//! wiring, shared by `main` and the black-box tests (which start the real
//! server in-process on port 0, or spawn the binary to crash it).

pub mod backfill;
pub mod import;
pub mod server;
pub mod settings;
