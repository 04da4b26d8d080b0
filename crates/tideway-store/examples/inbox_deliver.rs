//! The in-process inboxes alone: `InboxSet::deliver` of 20,000 posts to
//! 175 random followers each among 70,000 inboxes of 200 keys (cap 800),
//! while the inboxes grow and again once they are full, a key at a time
//! (`deliver`) and then a step of 64 keys at a time (`deliver_many`, as the
//! fan-out worker's steps). Prints each of five repetitions and the best
//! rate of each phase.
//!
//! `cargo run --release -p tideway-store --example inbox_deliver`

use rand::{Rng, SeedableRng, rngs::StdRng};
use std::time::Instant;
use tideway_core::UserId;
use tideway_store::inbox::InboxSet;

const USERS: u64 = 70_000;
const POSTS: usize = 20_000;
const FOLLOWERS: usize = 175;

#[allow(clippy::print_stdout)]
fn main() {
    let mut rng = StdRng::seed_from_u64(7);
    // Seconds a delivery, best of the repetitions: growing, full.
    let mut best = [[f64::MAX; 2]; 2];
    for (mode, how) in ["a key at a time", "64 keys at a time"].into_iter().enumerate() {
        for rep in 0..5 {
            let set = InboxSet::new(800);
            for u in 0..USERS {
                let keys: Vec<u64> = (0..200u64).map(|i| 1_000 + i * 1_000 + u).collect();
                set.begin_rebuild(UserId(u));
                set.finish_rebuild(UserId(u), &keys, 0);
            }
            let posts: Vec<Vec<UserId>> = (0..POSTS)
                .map(|_| {
                    let mut f: Vec<UserId> = (0..FOLLOWERS).map(|_| UserId(rng.random_range(0..USERS))).collect();
                    f.sort_unstable();
                    f.dedup();
                    f
                })
                .collect();
            let mut key = 1_000_000_000u64;
            for (phase, name) in ["growing", "full"].into_iter().enumerate() {
                if phase == 1 {
                    for _ in 0..5 {
                        for p in &posts {
                            key += 1;
                            set.deliver(key, p);
                        }
                    }
                }
                let t = Instant::now();
                let mut n = 0;
                if mode == 0 {
                    for p in &posts {
                        key += 1;
                        n += set.deliver(key, p);
                    }
                } else {
                    for step in posts.chunks(64) {
                        let batch: Vec<(u64, &[UserId])> = step
                            .iter()
                            .map(|p| {
                                key += 1;
                                (key, p.as_slice())
                            })
                            .collect();
                        n += set.deliver_many(&batch);
                    }
                }
                let s = t.elapsed().as_secs_f64() / n.max(1) as f64;
                best[mode][phase] = best[mode][phase].min(s);
                println!("{how}, repetition {rep}, inboxes {name}: {:.2}M deliveries/s", 1e-6 / s);
            }
        }
        println!(
            "best, {how}: growing {:.2}M deliveries/s, full {:.2}M deliveries/s",
            1e-6 / best[mode][0],
            1e-6 / best[mode][1]
        );
    }
}
