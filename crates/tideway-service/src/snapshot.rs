//! The inbox snapshot of a clean shutdown, so a clean restart starts with
//! warm inboxes instead of rebuilding each on its reader's first page.
//!
//! Written after requests drained and the fan-out worker stopped: it holds
//! every inbox, the unpushed keys of hot authors and reader activity. It is
//! valid only for the journal as it was then, so the next start loads it and
//! deletes it before serving: a crash later can never restore a stale one.
//! Pending fan-out jobs stay in the journal and resume (delivery is
//! idempotent). A damaged or foreign file is ignored: inboxes are then
//! rebuilt on read, which is correct, only slower.
//!
//! Format (little-endian): `TWSNAP01`, then three sections each led by a
//! u64 count — unpushed `(user, key)`, activity `(user, ms)`, inboxes
//! `(user, floor, n: u32, n keys)` — then an FNV-1a 64 checksum of it all.

use crate::service::FeedService;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;
use tideway_core::{Key, Millis, UserId};

const MAGIC: &[u8; 8] = b"TWSNAP01";

/// What a snapshot held.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SnapshotStats {
    pub inboxes: u64,
    pub entries: u64,
}

struct Hashing<W> {
    inner: W,
    hash: u64,
}

impl<W> Hashing<W> {
    fn mix(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.hash ^= u64::from(*b);
            self.hash = self.hash.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
}

impl<W: Write> Hashing<W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.mix(bytes);
        self.inner.write_all(bytes)
    }
    fn put_u64(&mut self, v: u64) -> std::io::Result<()> {
        self.put(&v.to_le_bytes())
    }
}

impl<R: Read> Hashing<R> {
    fn take(&mut self, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.read_exact(buf)?;
        self.mix(buf);
        Ok(())
    }
    fn get_u64(&mut self) -> std::io::Result<u64> {
        let mut b = [0u8; 8];
        self.take(&mut b)?;
        Ok(u64::from_le_bytes(b))
    }
}

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_owned())
}

impl FeedService {
    /// Writes the snapshot (to a temporary file, synced, then renamed).
    pub fn save_snapshot(&self, path: &Path) -> std::io::Result<SnapshotStats> {
        let tmp = path.with_extension("tmp");
        let file = std::fs::File::create(&tmp)?;
        let mut w = Hashing { inner: BufWriter::new(file), hash: 0xcbf2_9ce4_8422_2325 };
        w.put(MAGIC)?;
        let unpushed = self.unpushed_snapshot().map_err(std::io::Error::other)?;
        w.put_u64(unpushed.len() as u64)?;
        for (u, k) in unpushed {
            w.put_u64(u.0)?;
            w.put_u64(k)?;
        }
        let active = self.activity_snapshot().map_err(std::io::Error::other)?;
        w.put_u64(active.len() as u64)?;
        for (u, t) in active {
            w.put_u64(u.0)?;
            w.put_u64(t.0 as u64)?;
        }
        let inboxes = self.backend.export_inboxes().map_err(std::io::Error::other)?;
        let mut stats = SnapshotStats::default();
        w.put_u64(inboxes.len() as u64)?;
        for (u, floor, keys) in &inboxes {
            w.put_u64(u.0)?;
            w.put_u64(*floor)?;
            w.put(&(keys.len() as u32).to_le_bytes())?;
            for k in keys {
                w.put_u64(*k)?;
            }
            stats.inboxes += 1;
            stats.entries += keys.len() as u64;
        }
        let sum = w.hash;
        let mut inner = w.inner.into_inner().map_err(|e| e.into_error())?;
        inner.write_all(&sum.to_le_bytes())?;
        inner.sync_all()?;
        drop(inner);
        std::fs::rename(&tmp, path)?;
        Ok(stats)
    }

    /// Loads and deletes the snapshot if there is one. A damaged file is
    /// deleted too and reported as an error (inboxes then rebuild on read).
    pub fn load_snapshot(&self, path: &Path) -> std::io::Result<Option<SnapshotStats>> {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let result = self.read_snapshot(file);
        std::fs::remove_file(path)?;
        result.map(Some)
    }

    fn read_snapshot(&self, file: std::fs::File) -> std::io::Result<SnapshotStats> {
        let mut r = Hashing { inner: BufReader::new(file), hash: 0xcbf2_9ce4_8422_2325 };
        let mut magic = [0u8; 8];
        r.take(&mut magic)?;
        if &magic != MAGIC {
            return Err(bad("not a tideway inbox snapshot of this version"));
        }
        // Read everything first: nothing is installed unless the checksum holds.
        let n = r.get_u64()?;
        let mut unpushed = Vec::new();
        for _ in 0..n {
            unpushed.push((UserId(r.get_u64()?), r.get_u64()? as Key));
        }
        let n = r.get_u64()?;
        let mut active = Vec::new();
        for _ in 0..n {
            active.push((UserId(r.get_u64()?), Millis(r.get_u64()? as i64)));
        }
        let n = r.get_u64()?;
        let mut inboxes = Vec::new();
        for _ in 0..n {
            let (u, floor) = (UserId(r.get_u64()?), r.get_u64()?);
            let mut len = [0u8; 4];
            r.take(&mut len)?;
            let len = u32::from_le_bytes(len) as usize;
            let mut keys = Vec::with_capacity(len.min(1 << 20));
            for _ in 0..len {
                keys.push(r.get_u64()?);
            }
            inboxes.push((u, floor, keys));
        }
        let expect = r.hash;
        let mut sum = [0u8; 8];
        r.inner.read_exact(&mut sum)?;
        if u64::from_le_bytes(sum) != expect {
            return Err(bad("snapshot checksum mismatch"));
        }
        self.restore_memory(unpushed, active).map_err(std::io::Error::other)?;
        let mut stats = SnapshotStats::default();
        for (u, floor, keys) in inboxes {
            stats.inboxes += 1;
            stats.entries += keys.len() as u64;
            self.backend.import_inbox(u, floor, &keys).map_err(std::io::Error::other)?;
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use crate::{FanoutWorker, FeedService, ManualClock, PageRequest, ServiceOptions};
    use std::sync::Arc;
    use tideway_core::{ItemKind, Millis, NewItem, UserId};
    use tideway_store::{Backend, Store};

    fn service(hot: u64) -> Arc<FeedService> {
        let backend: Arc<dyn Backend> = Arc::new(Store::in_memory(3));
        let opts = ServiceOptions { max_len: 3, hot_followers: hot, ..ServiceOptions::default() };
        Arc::new(FeedService::new(backend, opts, Arc::new(ManualClock::new(Millis(1_700_000_000_000)))).expect("svc"))
    }

    #[test]
    fn a_snapshot_round_trips_and_is_used_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("inboxes.snapshot");
        // Author 2 (one follower) is pushed; author 3 (two followers) is hot.
        let a = service(2);
        a.follow_many(UserId(1), &[UserId(2), UserId(3)]).expect("follow");
        a.follow_many(UserId(4), &[UserId(3)]).expect("follow");
        a.home(UserId(1), &PageRequest::default()).expect("inbox");
        for author in [2, 2, 3, 2, 2, 3] {
            a.create_item(NewItem::new(UserId(author), ItemKind::Post)).expect("post");
        }
        FanoutWorker::new(a.clone()).drain().expect("drain");
        let saved = a.save_snapshot(&path).expect("save");
        assert_eq!((saved.inboxes, saved.entries), (1, 3), "the reader's inbox, capped at 3");
        let exported = a.backend().export_inboxes().expect("export");
        let unpushed = a.unpushed_snapshot().expect("export");
        assert_eq!(unpushed.iter().map(|(u, _)| *u).collect::<Vec<_>>(), vec![UserId(3)], "the hot author");

        let b = service(1);
        assert_eq!(b.load_snapshot(&path).expect("load"), Some(saved));
        assert!(!path.exists(), "a snapshot is used once");
        let mut got = b.backend().export_inboxes().expect("export");
        let mut want = exported;
        got.sort();
        want.sort();
        assert_eq!(got, want);
        assert_eq!(b.unpushed_snapshot().expect("export"), unpushed);
        assert!(b.user(UserId(1)).expect("user").active);
        assert_eq!(b.load_snapshot(&path).expect("load"), None);
        // The same home on both sides of the restart (b has no items: compare keys).
        let keys = |s: &FeedService| {
            s.backend()
                .read_inbox(UserId(1), tideway_core::merge::KeyRange::ALL, tideway_core::merge::Direction::Older, 10)
                .expect("read")
        };
        assert_eq!(keys(&b), keys(&a));
    }

    #[test]
    fn a_damaged_snapshot_is_refused_and_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("inboxes.snapshot");
        let a = service(u64::MAX);
        a.home(UserId(1), &PageRequest::default()).expect("inbox");
        a.save_snapshot(&path).expect("save");
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 9;
        bytes[last] ^= 0xff;
        std::fs::write(&path, bytes).expect("write");
        let b = service(u64::MAX);
        assert!(b.load_snapshot(&path).is_err());
        assert!(!path.exists());
        assert!(
            b.backend().export_inboxes().expect("export").is_empty(),
            "nothing from a damaged snapshot is installed"
        );
    }
}
