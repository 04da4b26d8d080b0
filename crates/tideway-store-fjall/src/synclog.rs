//! The sync log: what makes an acknowledged write durable when the store
//! runs with `fsync`.
//!
//! fjall's journal appends to a file that grows, so its `fdatasync` also
//! commits the file's new size: on this project's machines that costs
//! 150–270 µs, against ~70–120 µs for a write opened with `O_DSYNC` into
//! blocks already written, and less again with `O_DIRECT` as well
//! (docs/benchmarks.md, "Durable writes through a sync log"). So group
//! commit writes each round's batch here first, as one frame into a file
//! of fixed size whose blocks were written with zeros when it was made, and
//! hands the batch to fjall without syncing fjall.
//!
//! A frame starts on a block boundary and fills whole blocks:
//!
//! | bytes | what |
//! |---|---|
//! | 4 | `TWSL` |
//! | 8 | its sequence number, one more than the frame before |
//! | 4 | the length of its payload |
//! | 4 | CRC-32 of the sequence number, the length and the payload |
//! | n | the payload: the batch's writes ([`encode_ops`]) |
//! | … | zeros to the next block |
//!
//! The invariants that make replay exact:
//!
//! - a frame is written (and synced) before its batch is committed to
//!   fjall, and batches are committed in the frames' order;
//! - frames are written one after the other from the file's start; when
//!   the next does not fit, the journal first persists fjall (everything
//!   the log holds is then in fjall's synced journal), records the next
//!   sequence number as the log's base in fjall's `meta`, and starts again
//!   at offset 0;
//! - a replay at open is persisted in fjall and the base moved past it,
//!   so no frame is replayed twice over writes made after it (a migration,
//!   an import);
//! - so every frame in the file has a sequence number below the next one
//!   to be written, and the frames still needed are the chain that starts
//!   at offset 0 with the base's sequence number, each the one after the
//!   last, each with a good checksum. Replaying it into fjall
//!   after fjall's own recovery is idempotent: fjall recovers each keyspace
//!   to at least the state before the chain's first frame, and the chain's
//!   writes, applied in order, leave every key as the last of them left it.

use crate::layout::{Op, Space};
use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// The log's file name in the data directory.
pub(crate) const LOG_FILE: &str = "sync.log";
/// Its size: 8 MiB, 2,048 one-block frames between two persists of fjall.
pub(crate) const LOG_BYTES: u64 = 8 << 20;
/// The key in `meta` holding the log's base.
pub(crate) const BASE_KEY: &[u8] = b"sync_log_base";

const BLOCK: u64 = 4096;
const MAGIC: &[u8; 4] = b"TWSL";
const HEADER: usize = 20;

/// The open log; its writer is the group commit's leader, one at a time.
pub(crate) struct SyncLog {
    file: File,
    path: PathBuf,
    /// Opened for direct I/O (the file system took it).
    direct: bool,
    bytes: u64,
    /// Where the next frame starts.
    at: u64,
    /// The next frame's sequence number.
    seq: u64,
    /// The frame being built (from its first block boundary), kept for its
    /// capacity.
    frame: Vec<u8>,
}

/// The frames a log held at open, to be replayed, and where the log's
/// next frame will go.
pub(crate) struct Recovered {
    pub(crate) payloads: Vec<Vec<u8>>,
    pub(crate) next_seq: u64,
}

impl SyncLog {
    /// Reads the frames to replay from `dir`'s log, if it has one, given
    /// the base recorded in fjall.
    pub(crate) fn recover(dir: &Path, base: u64) -> io::Result<Recovered> {
        let mut payloads = Vec::new();
        let mut next_seq = base;
        let file = match File::open(dir.join(LOG_FILE)) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Recovered { payloads, next_seq }),
            Err(e) => return Err(e),
        };
        // Read a frame at a time: the chain is usually short, the file 8 MiB.
        let mut at = 0u64;
        while let Some((seq, payload)) = frame_at(&file, at)? {
            // The chain starts at offset 0 with the base's frame and goes
            // on one sequence number at a time.
            if seq != next_seq {
                break;
            }
            at += Self::frame_len(payload.len());
            payloads.push(payload);
            next_seq = seq + 1;
        }
        Ok(Recovered { payloads, next_seq })
    }

    /// Opens `dir`'s log for writing at its start, making it (zero-filled,
    /// then renamed into place) if it is missing or not of [`LOG_BYTES`].
    /// Call once what [`recover`](Self::recover) found is safe in fjall.
    pub(crate) fn open(dir: &Path, next_seq: u64) -> io::Result<SyncLog> {
        let path = dir.join(LOG_FILE);
        let fits = std::fs::metadata(&path).map(|m| m.len() == LOG_BYTES).unwrap_or(false);
        if !fits {
            let tmp = dir.join(format!("{LOG_FILE}.new"));
            let f = File::create(&tmp)?;
            let zeros = vec![0u8; 1 << 20];
            for i in 0..LOG_BYTES / zeros.len() as u64 {
                f.write_all_at(&zeros, i * zeros.len() as u64)?;
            }
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            File::open(dir)?.sync_all()?;
        }
        // Direct I/O skips the page cache's copy and its writeback: a frame
        // then costs ~100 µs against ~120 µs through the cache
        // (`scripts/bench/disk-sync.py`). A file system that refuses it
        // (tmpfs before Linux 6.6) gets the cached write, synced all the same.
        let (file, direct) = match open_log(&path, true) {
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (open_log(&path, false)?, false),
            f => (f?, true),
        };
        Ok(SyncLog { file, path, direct, bytes: LOG_BYTES, at: 0, seq: next_seq, frame: Vec::new() })
    }

    /// The bytes a frame of this payload takes.
    fn frame_len(payload: usize) -> u64 {
        (HEADER + payload).div_ceil(BLOCK as usize) as u64 * BLOCK
    }

    /// Whether a frame of this payload could ever fit: larger batches (a
    /// bulk rewrite) are persisted by fjall itself.
    pub(crate) fn could_hold(&self, payload: usize) -> bool {
        Self::frame_len(payload) <= self.bytes
    }

    /// Whether it fits after the frames written since the last wrap.
    pub(crate) fn fits(&self, payload: usize) -> bool {
        self.at + Self::frame_len(payload) <= self.bytes
    }

    /// The sequence number the next frame will carry.
    pub(crate) fn next_seq(&self) -> u64 {
        self.seq
    }

    /// Starts again at offset 0. Only once fjall holds, synced, everything
    /// written so far and the base is [`next_seq`](Self::next_seq).
    pub(crate) fn wrap(&mut self) {
        self.at = 0;
    }

    /// Writes one frame; returns once the disk has it.
    pub(crate) fn append(&mut self, payload: &[u8]) -> io::Result<()> {
        let len = Self::frame_len(payload.len());
        debug_assert!(self.at + len <= self.bytes);
        let plen = u32::try_from(payload.len()).map_err(|_| io::Error::other("sync log frame over 4 GiB"))?;
        let mut crc = crc32fast::Hasher::new();
        crc.update(&self.seq.to_le_bytes());
        crc.update(&plen.to_le_bytes());
        crc.update(payload);
        // Direct I/O needs the frame's memory aligned like its place in the
        // file: it is built at the first block boundary of the buffer,
        // whose capacity is made first so that it does not move.
        let f = &mut self.frame;
        f.clear();
        f.reserve(len as usize + BLOCK as usize);
        let start = f.as_ptr().align_offset(BLOCK as usize);
        f.resize(start, 0);
        f.extend_from_slice(MAGIC);
        f.extend_from_slice(&self.seq.to_le_bytes());
        f.extend_from_slice(&plen.to_le_bytes());
        f.extend_from_slice(&crc.finalize().to_le_bytes());
        f.extend_from_slice(payload);
        f.resize(start + len as usize, 0);
        debug_assert_eq!(f.as_ptr().align_offset(BLOCK as usize), start);
        if let Err(e) = self.file.write_all_at(&f[start..], self.at) {
            // A file system that took direct I/O at open but refuses this
            // write refuses it before writing anything: the frame goes
            // through the cache instead, from now on.
            if !(self.direct && e.raw_os_error() == Some(libc::EINVAL)) {
                return Err(e);
            }
            tracing::warn!(path = %self.path.display(), "direct I/O refused; the sync log writes through the page cache");
            self.file = open_log(&self.path, false)?;
            self.direct = false;
            self.file.write_all_at(&f[start..], self.at)?;
        }
        self.at += len;
        self.seq += 1;
        Ok(())
    }
}

/// Opens the log to write frames that are durable when written, with direct
/// I/O if `direct`.
fn open_log(path: &Path, direct: bool) -> io::Result<File> {
    let flags = if direct { libc::O_DSYNC | libc::O_DIRECT } else { libc::O_DSYNC };
    OpenOptions::new().read(true).write(true).custom_flags(flags).open(path)
}

/// The frame at `at`, if a whole one with a good checksum is there: its
/// sequence number and its payload.
fn frame_at(file: &File, at: u64) -> io::Result<Option<(u64, Vec<u8>)>> {
    let mut head = [0u8; HEADER];
    match file.read_exact_at(&mut head, at) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let word = |r: std::ops::Range<usize>| -> [u8; 4] { head[r].try_into().unwrap_or_default() };
    if &head[..4] != MAGIC {
        return Ok(None);
    }
    let seq = u64::from_le_bytes(head[4..12].try_into().unwrap_or_default());
    let plen = u32::from_le_bytes(word(12..16));
    let crc = u32::from_le_bytes(word(16..20));
    if SyncLog::frame_len(plen as usize) > LOG_BYTES {
        return Ok(None);
    }
    let mut payload = vec![0u8; plen as usize];
    match file.read_exact_at(&mut payload, at + HEADER as u64) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let mut h = crc32fast::Hasher::new();
    h.update(&seq.to_le_bytes());
    h.update(&plen.to_le_bytes());
    h.update(&payload);
    Ok((h.finalize() == crc).then_some((seq, payload)))
}

/// A batch's writes as a frame's payload: for each, a tag (0 put, 1
/// delete), its keyspace, the key's length and the key, and for a put the
/// value's length and the value (lengths as little-endian `u32`).
pub(crate) fn encode_ops(ops: &[Op], out: &mut Vec<u8>) {
    out.clear();
    for op in ops {
        let (tag, space, key, value) = match op {
            Op::Put(s, k, v) => (0u8, s, k, Some(v)),
            Op::Del(s, k) => (1u8, s, k, None),
        };
        out.push(tag);
        out.push(space.index() as u8);
        out.extend_from_slice(&(key.len() as u32).to_le_bytes());
        out.extend_from_slice(key);
        if let Some(v) = value {
            out.extend_from_slice(&(v.len() as u32).to_le_bytes());
            out.extend_from_slice(v);
        }
    }
}

/// The writes of a payload made by [`encode_ops`]; `None` if it is not one
/// (a frame with a good checksum that does not decode: a bug, not a crash).
pub(crate) fn decode_ops(mut p: &[u8]) -> Option<Vec<Op>> {
    fn take<'a>(p: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = p.split_at_checked(n)?;
        *p = rest;
        Some(head)
    }
    fn bytes(p: &mut &[u8]) -> Option<Vec<u8>> {
        let n = u32::from_le_bytes(take(p, 4)?.try_into().ok()?) as usize;
        take(p, n).map(<[u8]>::to_vec)
    }
    let mut ops = Vec::new();
    while !p.is_empty() {
        let head = take(&mut p, 2)?;
        let space = Space::from_index(head[1] as usize)?;
        let key = bytes(&mut p)?;
        ops.push(match head[0] {
            0 => Op::Put(space, key, bytes(&mut p)?),
            1 => Op::Del(space, key),
            _ => return None,
        });
    }
    Some(ops)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(n: u8, len: usize) -> Vec<u8> {
        vec![n; len]
    }

    #[test]
    fn frames_are_read_back_as_a_chain_from_the_base() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = SyncLog::open(dir.path(), 5).expect("open");
        // One frame of a block, one of two blocks, one of a block.
        for (n, len) in [(1u8, 10), (2, 5000), (3, 0)] {
            log.append(&payload(n, len)).expect("append");
        }
        let r = SyncLog::recover(dir.path(), 5).expect("recover");
        assert_eq!(r.payloads, vec![payload(1, 10), payload(2, 5000), payload(3, 0)]);
        assert_eq!(r.next_seq, 8);
        // A base past the first frame: the frames are already in fjall.
        let r = SyncLog::recover(dir.path(), 6).expect("recover");
        assert!(r.payloads.is_empty());
        assert_eq!(r.next_seq, 6);
        // A torn second frame ends the chain there.
        let path = dir.path().join(LOG_FILE);
        let mut bytes = std::fs::read(&path).expect("read");
        bytes[4096 + HEADER + 100] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        let r = SyncLog::recover(dir.path(), 5).expect("recover");
        assert_eq!(r.payloads, vec![payload(1, 10)]);
        assert_eq!(r.next_seq, 6);
    }

    /// Where the file system takes direct I/O the log uses it; where it is
    /// refused (tmpfs before Linux 6.6, `/dev/shm`) frames go through the
    /// cache. Either way they read back whole.
    #[test]
    fn frames_are_written_with_direct_io_or_through_the_cache() {
        let mut dirs = vec![tempfile::tempdir().expect("tempdir")];
        if let Ok(shm) = tempfile::tempdir_in("/dev/shm") {
            dirs.push(shm);
        }
        for dir in &dirs {
            let direct_taken = File::options()
                .write(true)
                .custom_flags(libc::O_DIRECT)
                .create(true)
                .truncate(true)
                .open(dir.path().join("probe"))
                .is_ok();
            let mut log = SyncLog::open(dir.path(), 0).expect("open");
            assert_eq!(log.direct, direct_taken, "direct I/O in {}", dir.path().display());
            for (n, len) in [(1u8, 10), (2, 9000), (3, 4096 - HEADER)] {
                log.append(&payload(n, len)).expect("append");
            }
            let r = SyncLog::recover(dir.path(), 0).expect("recover");
            assert_eq!(r.payloads, vec![payload(1, 10), payload(2, 9000), payload(3, 4096 - HEADER)]);
            assert_eq!(r.next_seq, 3);
        }
    }

    #[test]
    fn after_a_wrap_older_frames_beyond_the_new_ones_are_not_read() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = SyncLog::open(dir.path(), 0).expect("open");
        for n in 0..4u8 {
            log.append(&payload(n, 100)).expect("append");
        }
        // What a full log does once fjall holds its frames and the base is 4.
        log.wrap();
        log.append(&payload(9, 100)).expect("append");
        let r = SyncLog::recover(dir.path(), 4).expect("recover");
        assert_eq!(r.payloads, vec![payload(9, 100)], "frames 1 to 3, still in the file, are older");
        assert_eq!(r.next_seq, 5);
        // A missing log has nothing to replay.
        let empty = tempfile::tempdir().expect("tempdir");
        let r = SyncLog::recover(empty.path(), 7).expect("recover");
        assert!(r.payloads.is_empty() && r.next_seq == 7);
    }

    #[test]
    fn a_full_log_is_told_and_a_batch_larger_than_it_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut log = SyncLog::open(dir.path(), 0).expect("open");
        assert_eq!(std::fs::metadata(dir.path().join(LOG_FILE)).expect("meta").len(), LOG_BYTES);
        let block = BLOCK as usize - HEADER;
        for _ in 0..LOG_BYTES / BLOCK {
            assert!(log.fits(block));
            log.append(&vec![7; block]).expect("append");
        }
        assert!(!log.fits(0), "every block is taken");
        assert!(log.could_hold(LOG_BYTES as usize - HEADER));
        assert!(!log.could_hold(LOG_BYTES as usize - HEADER + 1));
    }

    #[test]
    fn writes_survive_their_encoding() {
        let ops = vec![
            Op::Put(Space::Items, b"key".to_vec(), b"value".to_vec()),
            Op::Del(Space::Live, vec![1, 2, 3]),
            Op::Put(Space::Meta, Vec::new(), Vec::new()),
        ];
        let mut once = Vec::new();
        encode_ops(&ops, &mut once);
        let back = decode_ops(&once).expect("decodes");
        assert_eq!(back.len(), 3);
        let mut twice = Vec::new();
        encode_ops(&back, &mut twice);
        assert_eq!(once, twice);
        assert!(decode_ops(&once[..once.len() - 1]).is_none(), "a cut payload is not a batch");
        assert!(decode_ops(&[0, 200, 0, 0, 0, 0]).is_none(), "no keyspace 200");
        assert!(decode_ops(&[5, 0, 0, 0, 0, 0]).is_none(), "no tag 5");
    }
}
