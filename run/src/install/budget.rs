//! An install's disk budget (`--max-install-mb`): what one install may write, checked twice.
//! Before unpacking, where the archive states its size: a wheel is a zip, and the sum of its
//! central directory's uncompressed sizes is exactly what pip unpacks (Python's `zipfile` reads
//! no entry past the size the directory gives). While writing, because a build backend or uv
//! (which unpacks into its cache during the fetch) writes what no archive announced: a watchdog
//! walks the folders the step may write (the venv, the scratch, the cache) every
//! [`WATCH_EVERY`], counts each inode's allocated blocks once (hard links cost nothing twice),
//! and the step is killed once they grew past the budget since the install began.
//!
//! Why a watchdog and not the kernel: no per-process total exists (`RLIMIT_FSIZE`, also set, is
//! per file); quotas need mount options this server cannot assume; a size-limited tmpfs holds
//! its files in memory and needs root. The watchdog can overshoot by what a step writes in one
//! interval; the per-file limit and the check before unpacking bound the common cases.

// The watchdog runs in `Steps::run`, which is Linux only.
#![cfg_attr(not(target_os = "linux"), allow(dead_code))]

use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How often the watchdog measures a running step's writes.
pub(super) const WATCH_EVERY: Duration = Duration::from_millis(500);

/// What one install may write, and where it writes.
#[derive(Debug, Clone)]
pub(super) struct DiskBudget {
    limit: u64,
    roots: Vec<PathBuf>,
    baseline: u64,
}

/// How the budget was passed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverBudget {
    /// The fetched wheels say they unpack to this many bytes: refused before unpacking.
    Stated(u64),
    /// A step wrote past the budget and was killed.
    Written,
}

impl DiskBudget {
    /// The budget `limit` over `roots` (missing ones count 0), measured from their use now.
    /// Blocking.
    pub(super) fn new(limit: u64, roots: Vec<PathBuf>) -> Self {
        let baseline = usage(&roots);
        Self {
            limit,
            roots,
            baseline,
        }
    }

    pub(super) fn limit(&self) -> u64 {
        self.limit
    }

    /// Whether the roots grew past the limit since the start. Blocking (a walk).
    pub(super) fn exceeded(&self) -> bool {
        usage(&self.roots).saturating_sub(self.baseline) > self.limit
    }

    /// The sum of the wheels' stated sizes in `dir`, when it passes the limit.
    pub(super) fn check_wheels(&self, dir: &Path) -> io::Result<Option<OverBudget>> {
        let stated = unpacked_wheels(dir)?;
        Ok((stated > self.limit).then_some(OverBudget::Stated(stated)))
    }
}

/// Allocated bytes under `roots`, each inode once, links never followed.
fn usage(roots: &[PathBuf]) -> u64 {
    let mut seen = std::collections::HashSet::new();
    let mut total = 0;
    for root in roots {
        walk(root, &mut seen, &mut total);
    }
    total
}

#[cfg(unix)]
fn walk(dir: &Path, seen: &mut std::collections::HashSet<(u64, u64)>, total: &mut u64) {
    use std::os::unix::fs::MetadataExt;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(entries) => entries,
            // A folder the step shut (`chmod 0300`, an unprivileged server's own): its owner's
            // access back, or what is inside would be neither counted nor removed after.
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied && opened(&dir) => {
                match std::fs::read_dir(&dir) {
                    Ok(entries) => entries,
                    Err(_) => continue,
                }
            }
            Err(_) => continue,
        };
        for entry in entries.flatten() {
            // `DirEntry::metadata` does not follow a link.
            let Ok(meta) = entry.metadata() else { continue };
            if seen.insert((meta.dev(), meta.ino())) {
                *total += meta.blocks() * 512;
            }
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
}

/// Gives folder `dir` (never a link) its owner's access back; whether it did.
#[cfg(unix)]
fn opened(dir: &Path) -> bool {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        rustix::fs::open(dir, flags, Mode::empty())
            .ok()
            .and_then(|fd| pyrun_sandbox::give_back(&fd, 0o700).ok())
            .unwrap_or(false)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = dir;
        false
    }
}

#[cfg(not(unix))]
fn walk(dir: &Path, _seen: &mut std::collections::HashSet<(u64, u64)>, total: &mut u64) {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(entry.path());
            } else {
                *total += meta.len();
            }
        }
    }
}

/// The sum of every `.whl`'s stated unpacked size in `dir` (none there: 0).
fn unpacked_wheels(dir: &Path) -> io::Result<u64> {
    let entries = match std::fs::read_dir(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(0),
        other => other?,
    };
    let mut total = 0u64;
    for entry in entries {
        let entry = entry?;
        if entry.file_name().to_string_lossy().ends_with(".whl") && entry.file_type()?.is_file() {
            let mut file = std::fs::File::open(entry.path())?;
            total = total.saturating_add(zip_unpacked_size(&mut file)?);
        }
    }
    Ok(total)
}

/// End of central directory record, its ZIP64 locator and record, a central directory header.
const EOCD: u32 = 0x0605_4b50;
const ZIP64_LOCATOR: u32 = 0x0706_4b50;
const ZIP64_EOCD: u32 = 0x0606_4b50;
const CENTRAL: u32 = 0x0201_4b50;
/// The largest central directory read (a wheel of 100,000 files has a few MB).
const MAX_CENTRAL_DIRECTORY: u64 = 64 << 20;

fn bad(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("not a zip: {what}"))
}

fn u16_at(b: &[u8], at: usize) -> io::Result<u64> {
    b.get(at..at + 2)
        .map(|s| u64::from(u16::from_le_bytes([s[0], s[1]])))
        .ok_or_else(|| bad("short record"))
}

fn u32_at(b: &[u8], at: usize) -> io::Result<u64> {
    b.get(at..at + 4)
        .map(|s| u64::from(u32::from_le_bytes([s[0], s[1], s[2], s[3]])))
        .ok_or_else(|| bad("short record"))
}

fn u64_at(b: &[u8], at: usize) -> io::Result<u64> {
    let s = b.get(at..at + 8).ok_or_else(|| bad("short record"))?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Ok(u64::from_le_bytes(a))
}

/// The sum of a zip's uncompressed sizes as its central directory states them (ZIP64 too).
pub(super) fn zip_unpacked_size<R: Read + Seek>(zip: &mut R) -> io::Result<u64> {
    let len = zip.seek(SeekFrom::End(0))?;
    // The end record (22 bytes) plus a comment of at most 64 KiB, and a ZIP64 locator before.
    let tail_len = len.min(22 + 0xFFFF + 20);
    zip.seek(SeekFrom::Start(len - tail_len))?;
    let mut tail = vec![0u8; tail_len as usize];
    zip.read_exact(&mut tail)?;
    let eocd = (0..tail.len().saturating_sub(21))
        .rev()
        .find(|&i| u32_at(&tail, i).ok() == Some(u64::from(EOCD)))
        .ok_or_else(|| bad("no end of central directory"))?;
    // Read as Python's `zipfile` (pip's unpacker) reads it, whatever the records claim: a
    // ZIP64 locator just before the end record is followed whenever it is there, the ZIP64
    // record is the one just before the locator, the central directory is the `size` bytes just
    // before the end records (the stated offset and entry count are not trusted: a count of 0,
    // or an offset at a small decoy directory, would otherwise hide what pip unpacks), and it is
    // walked to its end.
    let eocd_at = len - tail_len + eocd as u64;
    let mut size = u32_at(&tail, eocd + 12)?;
    let mut end_records = 0u64;
    let locator = eocd.checked_sub(20);
    if locator.is_some_and(|l| u32_at(&tail, l).ok() == Some(u64::from(ZIP64_LOCATOR))) {
        let record_at = eocd_at
            .checked_sub(20 + 56)
            .ok_or_else(|| bad("no ZIP64 end record"))?;
        zip.seek(SeekFrom::Start(record_at))?;
        let mut record = [0u8; 56];
        zip.read_exact(&mut record)?;
        if u32_at(&record, 0)? != u64::from(ZIP64_EOCD) {
            return Err(bad("no ZIP64 end record"));
        }
        size = u64_at(&record, 40)?;
        end_records = 20 + 56;
    }
    if size > MAX_CENTRAL_DIRECTORY {
        return Err(bad("central directory too large"));
    }
    let start = eocd_at
        .checked_sub(end_records + size)
        .ok_or_else(|| bad("central directory before the file's start"))?;
    zip.seek(SeekFrom::Start(start))?;
    let mut dir = vec![0u8; size as usize];
    zip.read_exact(&mut dir)?;
    let (mut at, mut total) = (0usize, 0u64);
    while at < dir.len() {
        if u32_at(&dir, at)? != u64::from(CENTRAL) {
            return Err(bad("bad central directory entry"));
        }
        let mut unpacked = u32_at(&dir, at + 24)?;
        let name = u16_at(&dir, at + 28)? as usize;
        let extra = u16_at(&dir, at + 30)? as usize;
        let comment = u16_at(&dir, at + 32)? as usize;
        if unpacked == 0xFFFF_FFFF {
            unpacked = zip64_unpacked(&dir, at + 46 + name, extra)?;
        }
        total = total.saturating_add(unpacked);
        at += 46 + name + extra + comment;
    }
    Ok(total)
}

/// The uncompressed size in an entry's ZIP64 extra field (id 1; the size comes first).
fn zip64_unpacked(dir: &[u8], start: usize, len: usize) -> io::Result<u64> {
    let mut at = start;
    while at + 4 <= start + len {
        let id = u16_at(dir, at)?;
        let size = u16_at(dir, at + 2)? as usize;
        if id == 1 {
            return u64_at(dir, at + 4);
        }
        at += 4 + size;
    }
    Err(bad("no ZIP64 size"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A zip made by the test interpreter's `zipfile` (stored and deflated entries, one forced
    /// to ZIP64): the stated sizes add up.
    #[test]
    fn a_zips_stated_sizes_are_summed_from_its_central_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x-1.0-py3-none-any.whl");
        let script = "import sys, zipfile\n\
             with zipfile.ZipFile(sys.argv[1], 'w', zipfile.ZIP_DEFLATED) as z:\n\
             \x20   z.writestr('a.txt', 'x' * 1000)\n\
             \x20   z.writestr(zipfile.ZipInfo('b.bin'), bytes(5000), zipfile.ZIP_STORED)\n\
             \x20   with z.open('c.bin', 'w', force_zip64=True) as f:\n\
             \x20       f.write(bytes(3 << 20))\n";
        let ok = std::process::Command::new("python3")
            .args(["-c", script])
            .arg(&path)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if !ok {
            eprintln!("no python3 here: skipped");
            return;
        }
        let mut file = std::fs::File::open(&path).unwrap();
        assert_eq!(
            zip_unpacked_size(&mut file).unwrap(),
            1000 + 5000 + (3 << 20)
        );
        assert_eq!(
            unpacked_wheels(dir.path()).unwrap(),
            1000 + 5000 + (3 << 20)
        );
        // The end record's entry count and offset lie (0 entries, an offset past the end):
        // Python reads every entry anyway, and so does the count.
        let mut bytes = std::fs::read(&path).unwrap();
        let eocd = bytes.windows(4).rposition(|w| w == b"PK\x05\x06").unwrap();
        bytes[eocd + 8..eocd + 12].fill(0);
        bytes[eocd + 16..eocd + 20].fill(0xEE);
        let mut lying = io::Cursor::new(bytes);
        assert_eq!(
            zip_unpacked_size(&mut lying).unwrap(),
            1000 + 5000 + (3 << 20)
        );
        let mut junk = io::Cursor::new(vec![0u8; 100]);
        assert!(zip_unpacked_size(&mut junk).is_err());
    }
}
