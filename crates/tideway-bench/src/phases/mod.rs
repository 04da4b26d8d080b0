//! The benchmark's phases, in the order `main` runs them; each measures one
//! thing and adds its rows to the report (or keeps figures for the
//! comparison rows).

pub mod baseline;
pub mod celebrity;
pub mod compare;
pub mod fanout;
pub mod http;
pub mod likes;
pub mod load;
pub mod mixes;
pub mod reads;
pub mod returning;
pub mod sql_pull;
pub mod writes;
