//! Black-box tests of the HTTP API against the real server on port 0:
//! every endpoint, the bad-input matrix, auth, and a crash test that
//! `kill -9`s the real binary during a stream of acknowledged writes.

mod auth;
mod bad_input;
mod crash;
mod daemons;
mod failover;
mod faults;
mod feeds;
mod graph;
mod hardening;
mod helpers;
mod import;
mod items;
mod kills;
mod links;
mod live;
mod nodes;
mod notifications;
mod postings;
mod promotions;
mod reactions;
mod stream;
