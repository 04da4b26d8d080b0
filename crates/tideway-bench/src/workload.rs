//! Workloads: which follow graph, and which stream of writes.
//!
//! * `twitter`: `../shared/data/twitter-follow.txt.gz` (or any `a b` edge file):
//!   posts with authors drawn in proportion to their follower counts.
//! * `synthetic:USERS:FOLLOWS`: a seeded power-law graph of exactly FOLLOWS
//!   distinct follows (followees drawn with weight 1/rank, followers
//!   uniformly; duplicates are dropped and drawn again).
//! * `higgs`: the Higgs activity trace replayed as posts, reposts, mentions and
//!   replies. Its follow graph is not in `shared/data`; the retweet network
//!   stands in for it (A retweeted B ⇒ A follows B).

use flate2::read::GzDecoder;
use rand::distr::{Distribution, weighted::WeightedIndex};
use rand::{Rng, SeedableRng, rngs::StdRng, seq::SliceRandom};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// Which graph.
#[derive(Debug, Clone)]
pub enum Graph {
    File(PathBuf),
    Synthetic { users: u64, follows: u64 },
    Higgs,
}

impl Graph {
    pub fn parse(s: &str) -> Result<Self, String> {
        if s == "twitter" {
            return Ok(Graph::File(PathBuf::from("../shared/data/twitter-follow.txt.gz")));
        }
        if s == "higgs" {
            return Ok(Graph::Higgs);
        }
        if let Some(rest) = s.strip_prefix("synthetic:") {
            let mut it = rest.split(':');
            let users = it.next().and_then(|v| v.parse().ok());
            let follows = it.next().and_then(|v| v.parse().ok());
            return match (users, follows) {
                (Some(users), Some(follows)) if users > 1 => Ok(Graph::Synthetic { users, follows }),
                _ => Err(format!("--graph {s}: expected synthetic:USERS:FOLLOWS")),
            };
        }
        Ok(Graph::File(PathBuf::from(s)))
    }

    pub fn describe(&self) -> String {
        match self {
            Graph::File(p) => format!("follow graph {}", p.display()),
            Graph::Synthetic { users, follows } => {
                format!("seeded synthetic power-law graph of {users} users and {follows} follows")
            }
            Graph::Higgs => "Higgs trace (retweet network as the follow graph)".to_owned(),
        }
    }
}

fn lines(path: &Path) -> Result<impl Iterator<Item = String>, String> {
    let f = std::fs::File::open(path).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(BufReader::new(GzDecoder::new(f)).lines().map_while(Result::ok))
}

/// `a b …` pairs of a gzip edge file, without self-loops.
fn edge_file(path: &Path) -> Result<Vec<(u64, u64)>, String> {
    let mut edges = Vec::new();
    for line in lines(path)? {
        let mut it = line.split_whitespace();
        if let (Some(a), Some(b)) = (it.next(), it.next())
            && let (Ok(a), Ok(b)) = (a.parse::<u64>(), b.parse::<u64>())
            && a != b
        {
            // Ids start at 1 in tideway; the Higgs and SNAP files have 0.
            edges.push((a + 1, b + 1));
        }
    }
    Ok(edges)
}

/// The edges `follower -> followee` of a graph.
pub fn edges(g: &Graph, data: &Path, seed: u64, max_following: usize) -> Result<Vec<(u64, u64)>, String> {
    let mut edges = match g {
        Graph::File(p) => edge_file(p)?,
        Graph::Higgs => edge_file(&data.join("higgs-retweet_network.edgelist.gz"))?,
        Graph::Synthetic { users, follows } => {
            let mut rng = StdRng::seed_from_u64(seed);
            let weights: Vec<f64> = (1..=*users).map(|r| 1.0 / r as f64).collect();
            let zipf = WeightedIndex::new(&weights).map_err(|e| e.to_string())?;
            let target = usize::try_from(*follows).map_err(|e| e.to_string())?;
            if target as u128 > u128::from(*users) * u128::from(*users - 1) / 2 {
                // Near saturation, drawing the last distinct pairs would take forever.
                return Err(format!(
                    "synthetic:{users}:{follows}: at most half of the {users}×{} possible follows",
                    users - 1
                ));
            }
            let mut edges: Vec<(u64, u64)> = Vec::with_capacity(target + target / 8);
            // The most followed accounts saturate (everyone follows them), so
            // draws repeat: draw again until FOLLOWS distinct follows exist,
            // then drop a random excess.
            while edges.len() < target {
                let missing = target - edges.len();
                edges.extend(
                    (0..missing + missing / 4 + 16)
                        .map(|_| (rng.random_range(1..=*users), zipf.sample(&mut rng) as u64 + 1))
                        .filter(|(a, b)| a != b),
                );
                edges.sort_unstable();
                edges.dedup();
            }
            if edges.len() > target {
                edges.shuffle(&mut rng);
                edges.truncate(target);
            }
            edges
        }
    };
    edges.sort_unstable();
    edges.dedup();
    // Respect graph.max_following: keep each follower's first followees.
    let mut out = Vec::with_capacity(edges.len());
    let mut run = (0u64, 0usize);
    for e in edges {
        if e.0 != run.0 {
            run = (e.0, 0);
        }
        if run.1 < max_following {
            out.push(e);
            run.1 += 1;
        }
    }
    Ok(out)
}

/// One write of the Higgs trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `user` reposts `target`'s latest original.
    Repost { user: u64, target: u64 },
    /// `user` posts mentioning `target`.
    Mention { user: u64, target: u64 },
    /// `user` replies to `target`'s latest original.
    Reply { user: u64, target: u64 },
}

/// The Higgs activity trace: (unix seconds, event), in time order. `RE`
/// lines also appear as `MT` lines; the `MT` twin of a reply is dropped.
pub fn higgs_events(data: &Path, limit: usize) -> Result<Vec<(i64, Event)>, String> {
    let mut out: Vec<(i64, Event)> = Vec::new();
    for line in lines(&data.join("higgs-activity_time.txt.gz"))? {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(a), Some(b), Some(t), Some(kind)) = (f.first(), f.get(1), f.get(2), f.get(3)) else { continue };
        let (Ok(a), Ok(b), Ok(t)) = (a.parse::<u64>(), b.parse::<u64>(), t.parse::<i64>()) else { continue };
        let (user, target) = (a + 1, b + 1);
        let ev = match *kind {
            "RT" => Event::Repost { user, target },
            "MT" => Event::Mention { user, target },
            "RE" => {
                if out.last() == Some(&(t, Event::Mention { user, target })) {
                    out.pop();
                }
                Event::Reply { user, target }
            }
            _ => continue,
        };
        out.push((t, ev));
        if out.len() >= limit {
            break;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_synthetic_graph_has_exactly_the_follows_asked_for() {
        // 30k draws over 1,000 users repeat often (the top accounts saturate).
        let g = Graph::parse("synthetic:1000:30000").expect("parse");
        let e = edges(&g, Path::new("."), 7, usize::MAX).expect("edges");
        assert_eq!(e.len(), 30_000);
        assert!(e.windows(2).all(|w| w[0] < w[1]), "sorted and distinct");
        assert!(e.iter().all(|(a, b)| a != b && (1..=1000).contains(a) && (1..=1000).contains(b)));
        // Power law: the first account is followed by far more than the median.
        let count = |u: u64| e.iter().filter(|x| x.1 == u).count();
        assert!(count(1) > 10 * count(500), "{} vs {}", count(1), count(500));
        assert_eq!(e, edges(&g, Path::new("."), 7, usize::MAX).expect("edges"), "seeded");
        assert!(edges(&Graph::parse("synthetic:10:100").expect("parse"), Path::new("."), 7, 10).is_err());
    }
}
