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

/// What a snapshot holds, in memory.
struct Contents {
    unpushed: Vec<(UserId, Key)>,
    active: Vec<(UserId, Millis)>,
    inboxes: Vec<(UserId, Key, Vec<Key>)>,
}

impl Contents {
    fn stats(&self) -> SnapshotStats {
        SnapshotStats {
            inboxes: self.inboxes.len() as u64,
            entries: self.inboxes.iter().map(|(_, _, k)| k.len() as u64).sum(),
        }
    }

    /// Writes to a temporary file, synced, then renamed (blocking I/O).
    fn write(&self, path: &Path) -> std::io::Result<()> {
        let tmp = path.with_extension("tmp");
        let file = std::fs::File::create(&tmp)?;
        let mut w = Hashing { inner: BufWriter::new(file), hash: 0xcbf2_9ce4_8422_2325 };
        w.put(MAGIC)?;
        w.put_u64(self.unpushed.len() as u64)?;
        for (u, k) in &self.unpushed {
            w.put_u64(u.0)?;
            w.put_u64(*k)?;
        }
        w.put_u64(self.active.len() as u64)?;
        for (u, t) in &self.active {
            w.put_u64(u.0)?;
            w.put_u64(t.0 as u64)?;
        }
        w.put_u64(self.inboxes.len() as u64)?;
        for (u, floor, keys) in &self.inboxes {
            w.put_u64(u.0)?;
            w.put_u64(*floor)?;
            w.put(&(keys.len() as u32).to_le_bytes())?;
            for k in keys {
                w.put_u64(*k)?;
            }
        }
        let sum = w.hash;
        let mut inner = w.inner.into_inner().map_err(|e| e.into_error())?;
        inner.write_all(&sum.to_le_bytes())?;
        inner.sync_all()?;
        drop(inner);
        std::fs::rename(&tmp, path)
    }

    /// Reads and deletes the file if there is one (blocking I/O). A damaged
    /// file is deleted too and reported as an error.
    fn take(path: &Path) -> std::io::Result<Option<Self>> {
        let file = match std::fs::File::open(path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let result = Self::read(file);
        std::fs::remove_file(path)?;
        result.map(Some)
    }

    fn read(file: std::fs::File) -> std::io::Result<Self> {
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
        Ok(Self { unpushed, active, inboxes })
    }
}

/// Runs blocking file work on the blocking pool.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> std::io::Result<T> + Send + 'static) -> std::io::Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(std::io::Error::other)?
}

impl crate::service::ops::OpsService {
    /// Writes the snapshot (to a temporary file, synced, then renamed).
    pub async fn save_snapshot(&self, path: &Path) -> std::io::Result<SnapshotStats> {
        let contents = Contents {
            unpushed: self.unpushed_snapshot().await.map_err(std::io::Error::other)?,
            active: self.activity_snapshot().await.map_err(std::io::Error::other)?,
            inboxes: self.backend.export_inboxes().await.map_err(std::io::Error::other)?,
        };
        let stats = contents.stats();
        let path = path.to_owned();
        blocking(move || contents.write(&path)).await?;
        Ok(stats)
    }

    /// Loads and deletes the snapshot if there is one. A damaged file is
    /// deleted too and reported as an error (inboxes then rebuild on read).
    pub async fn load_snapshot(&self, path: &Path) -> std::io::Result<Option<SnapshotStats>> {
        let path = path.to_owned();
        let Some(contents) = blocking(move || Contents::take(&path)).await? else { return Ok(None) };
        let stats = contents.stats();
        let Contents { unpushed, active, inboxes } = contents;
        self.restore_memory(unpushed, active).await.map_err(std::io::Error::other)?;
        for (u, floor, keys) in &inboxes {
            self.backend.import_inbox(*u, *floor, keys).await.map_err(std::io::Error::other)?;
        }
        Ok(Some(stats))
    }
}

#[cfg(test)]
mod tests {
    use crate::{FanoutWorker, FeedService, ManualClock, PageRequest, ServiceOptions};
    use std::sync::Arc;
    use tideway_core::{ItemKind, Millis, NewItem, UserId};
    use tideway_store::{Backend, Store};

    async fn service(hot: u64) -> Arc<FeedService> {
        let backend: Arc<dyn Backend> = Arc::new(Store::in_memory(3));
        let opts = ServiceOptions { max_len: 3, hot_followers: hot, ..ServiceOptions::default() };
        Arc::new(
            FeedService::new(backend, opts, Arc::new(ManualClock::new(Millis(1_700_000_000_000)))).await.expect("svc"),
        )
    }

    #[tokio::test]
    async fn a_snapshot_round_trips_and_is_used_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("inboxes.snapshot");
        // Author 2 (one follower) is pushed; author 3 (two followers) is hot.
        let a = service(2).await;
        a.graph.follow_many(UserId(1), &[UserId(2), UserId(3)]).await.expect("follow");
        a.graph.follow_many(UserId(4), &[UserId(3)]).await.expect("follow");
        a.feeds.home(UserId(1), &PageRequest::default()).await.expect("inbox");
        for author in [2, 2, 3, 2, 2, 3] {
            a.items.create_item(NewItem::new(UserId(author), ItemKind::Post)).await.expect("post");
        }
        FanoutWorker::new(a.clone()).drain().await.expect("drain");
        let saved = a.ops.save_snapshot(&path).await.expect("save");
        assert_eq!((saved.inboxes, saved.entries), (1, 3), "the reader's inbox, capped at 3");
        let exported = a.backend().export_inboxes().await.expect("export");
        let unpushed = a.ops.unpushed_snapshot().await.expect("export");
        assert_eq!(unpushed.iter().map(|(u, _)| *u).collect::<Vec<_>>(), vec![UserId(3)], "the hot author");

        let b = service(1).await;
        assert_eq!(b.ops.load_snapshot(&path).await.expect("load"), Some(saved));
        assert!(!path.exists(), "a snapshot is used once");
        let mut got = b.backend().export_inboxes().await.expect("export");
        let mut want = exported;
        got.sort();
        want.sort();
        assert_eq!(got, want);
        assert_eq!(b.ops.unpushed_snapshot().await.expect("export"), unpushed);
        assert!(b.ops.user(UserId(1)).await.expect("user").active);
        assert_eq!(b.ops.load_snapshot(&path).await.expect("load"), None);
        // The same home on both sides of the restart (b has no items: compare keys).
        let (all, older) = (tideway_core::merge::KeyRange::ALL, tideway_core::merge::Direction::Older);
        let after = b.backend().read_inbox(UserId(1), all, older, 10).await.expect("read");
        let before = a.backend().read_inbox(UserId(1), all, older, 10).await.expect("read");
        assert_eq!(after, before);
    }

    #[tokio::test]
    async fn a_damaged_snapshot_is_refused_and_removed() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("inboxes.snapshot");
        let a = service(u64::MAX).await;
        a.feeds.home(UserId(1), &PageRequest::default()).await.expect("inbox");
        a.ops.save_snapshot(&path).await.expect("save");
        let mut bytes = std::fs::read(&path).expect("read");
        let last = bytes.len() - 9;
        bytes[last] ^= 0xff;
        std::fs::write(&path, bytes).expect("write");
        let b = service(u64::MAX).await;
        assert!(b.ops.load_snapshot(&path).await.is_err());
        assert!(!path.exists());
        assert!(
            b.backend().export_inboxes().await.expect("export").is_empty(),
            "nothing from a damaged snapshot is installed"
        );
    }
}
