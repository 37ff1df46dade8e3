//! The project snapshot a remote run takes along: the script's top-level project folder (for a
//! script directly in the projects folder, only the files beside it) as a gzip'd tar.
//!
//! Left out, never followed: symbolic links and anything but regular files and folders;
//! protected names (`.git`, `.env*`, `.venv`... — `pyrun_sandbox::is_protected_name`); any
//! virtual environment (a folder holding `pyvenv.cfg`); `__pycache__`; files over the per-file
//! cap. The archive is built in memory: it must fit in one request anyway.

use std::fs;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use flate2::write::GzEncoder;
use flate2::Compression;

/// What a snapshot may hold.
#[derive(Debug, Clone, Copy)]
pub struct SnapshotLimits {
    /// A file larger than this stays behind.
    pub max_file_bytes: u64,
    /// Entries walked at most (a runaway folder ends the walk, reported as left out).
    pub max_entries: usize,
    /// The compressed archive's size past which packing stops ([`Snapshot::over_limit`]): a
    /// hostile project must not make the server hold more than one request could carry.
    pub max_archive_bytes: usize,
    /// File bytes read at most (sparse or repetitive files compress to nearly nothing, and
    /// still cost the server's CPU to read and compress).
    pub max_read_bytes: u64,
}

/// A project folder, packed.
#[derive(Debug)]
pub struct Snapshot {
    /// The gzip'd tar.
    pub archive: Vec<u8>,
    /// The script's path inside the archive (`/` separators).
    pub script: String,
    /// Files taken along, with their sizes, largest first.
    pub files: Vec<(String, u64)>,
    /// Files left behind for their size (name, size).
    pub too_large: Vec<(String, u64)>,
    /// Packing stopped at [`SnapshotLimits::max_archive_bytes`] or
    /// [`SnapshotLimits::max_read_bytes`]: the archive is cut and must not be sent; `files` lists
    /// every file that would have gone.
    pub over_limit: bool,
}

/// Why no snapshot was made.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("the project folder could not be read ({0})")]
    Io(std::io::ErrorKind),
    #[error("the script is not inside its project folder")]
    Outside,
}

impl From<std::io::Error> for SnapshotError {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e.kind())
    }
}

/// Packs the project of `script` (its canonical path; `relative` is its path inside the
/// projects folder, `/`-separated). Blocking.
pub fn pack(
    script: &Path,
    relative: &str,
    limits: SnapshotLimits,
) -> Result<Snapshot, SnapshotError> {
    let depth = relative.split('/').count();
    let mut root = script.to_path_buf();
    for _ in 0..depth {
        if !root.pop() {
            return Err(SnapshotError::Outside);
        }
    }
    // `proj/sub/main.py`: the snapshot is `proj/` and the script `sub/main.py` in it; a script
    // directly in the projects folder takes only the files beside it.
    let (top, script_inside, recurse) = match relative.split_once('/') {
        Some((top, rest)) => (root.join(top), rest.to_owned(), true),
        None => (root, relative.to_owned(), false),
    };
    let listed = list(&top, recurse, limits)?;
    let (archive, files, over_limit) = archive(&top, listed.files, limits)?;
    Ok(Snapshot {
        archive,
        script: script_inside,
        files,
        too_large: listed.too_large,
        over_limit,
    })
}

/// Names with their sizes.
type NamedSizes = Vec<(String, u64)>;

/// Walks the project folder: what would be taken along.
fn list(top: &Path, recurse: bool, limits: SnapshotLimits) -> Result<Walk, SnapshotError> {
    let mut walk = Walk {
        limits,
        files: Vec::new(),
        too_large: Vec::new(),
        entries: 0,
    };
    walk.folder(top, "", recurse)?;
    Ok(walk)
}

/// Packs the listed files; returns the archive, the files in it with their sizes, largest first,
/// and whether packing stopped at a limit (then the files are all the listed ones).
fn archive(
    top: &Path,
    listed: Vec<(String, PathBuf, u64)>,
    limits: SnapshotLimits,
) -> Result<(Vec<u8>, NamedSizes, bool), SnapshotError> {
    let top = Top::open(top)?;
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    let mut packed = Vec::with_capacity(listed.len());
    let mut read = 0u64;
    let mut over = false;
    for (name, _, size) in &listed {
        read = read.saturating_add(*size);
        if read > limits.max_read_bytes || tar.get_ref().get_ref().len() > limits.max_archive_bytes
        {
            over = true;
            break;
        }
        let (name, size) = (name.clone(), *size);
        // Swapped for a link, a pipe or a device since the walk, or gone: left behind.
        let Some(file) = top.open_file(&name) else {
            continue;
        };
        let mut header = tar::Header::new_gnu();
        header.set_size(size);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        // A file that changed size since it was listed is read at its listed size (cut, or
        // padded with zeros): the header is already written.
        tar.append_data(
            &mut header,
            &name,
            file.take(size).chain(std::io::repeat(0)).take(size),
        )?;
        packed.push((name, size));
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    let archive = gz.finish()?;
    if over || archive.len() > limits.max_archive_bytes {
        over = true;
        packed = listed.into_iter().map(|(n, _, s)| (n, s)).collect();
    }
    packed.sort_by_key(|f| std::cmp::Reverse(f.1));
    Ok((archive, packed, over))
}

/// The project folder as the packing reads it. On Linux, a handle opened once: every file is
/// opened beneath it with no link followed on the way (a script running beside the server may
/// swap any part of the path between the walk and the packing). Elsewhere, the path, each file
/// opened without following its last part. Never waits on a pipe swapped in.
struct Top {
    #[cfg(target_os = "linux")]
    fd: rustix::fd::OwnedFd,
    #[cfg(not(target_os = "linux"))]
    path: PathBuf,
}

impl Top {
    #[cfg(target_os = "linux")]
    fn open(top: &Path) -> Result<Self, SnapshotError> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let fd = rustix::fs::open(top, flags, Mode::empty()).map_err(std::io::Error::from)?;
        Ok(Self { fd })
    }

    #[cfg(not(target_os = "linux"))]
    fn open(top: &Path) -> Result<Self, SnapshotError> {
        Ok(Self {
            path: top.to_path_buf(),
        })
    }

    /// The listed file `name`, if it is still a plain file.
    fn open_file(&self, name: &str) -> Option<fs::File> {
        #[cfg(target_os = "linux")]
        let file = pyrun_run::paths::open_beneath_dir(&self.fd, Path::new(name));
        #[cfg(not(target_os = "linux"))]
        let file = pyrun_run::paths::open_beneath(&self.path, Path::new(name));
        let file = file.ok()?;
        file.metadata().ok()?.is_file().then_some(file)
    }
}

struct Walk {
    limits: SnapshotLimits,
    files: Vec<(String, PathBuf, u64)>,
    too_large: Vec<(String, u64)>,
    entries: usize,
}

impl Walk {
    fn folder(&mut self, dir: &Path, prefix: &str, recurse: bool) -> Result<(), SnapshotError> {
        let mut entries: Vec<_> = fs::read_dir(dir)?.filter_map(Result::ok).collect();
        entries.sort_by_key(fs::DirEntry::file_name);
        for entry in entries {
            self.entries += 1;
            if self.entries > self.limits.max_entries {
                return Ok(());
            }
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue; // a name the worker's tar could not carry faithfully
            };
            if pyrun_sandbox::is_protected_name(name.as_bytes()) {
                continue;
            }
            // `DirEntry::file_type` does not follow links: a link is neither file nor folder.
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let shown = format!("{prefix}{name}");
            if kind.is_dir() {
                if recurse && !entry.path().join("pyvenv.cfg").exists() {
                    self.folder(&entry.path(), &format!("{shown}/"), true)?;
                }
            } else if kind.is_file() {
                let size = entry.metadata()?.len();
                if size > self.limits.max_file_bytes {
                    self.too_large.push((shown, size));
                } else {
                    self.files.push((shown, entry.path(), size));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(archive: &[u8]) -> Vec<String> {
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
        let mut names: Vec<String> = tar
            .entries()
            .unwrap()
            .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_snapshot_takes_the_project_without_protected_names_venvs_caches_or_big_files() {
        let root = tempfile::tempdir().unwrap();
        let proj = root.path().join("proj");
        for dir in ["sub", ".git", "__pycache__", "env/lib", ".venv"] {
            fs::create_dir_all(proj.join(dir)).unwrap();
        }
        fs::write(proj.join("main.py"), "print(1)").unwrap();
        fs::write(proj.join("sub/data.csv"), "a,b").unwrap();
        fs::write(proj.join(".env"), "SECRET=1").unwrap();
        fs::write(proj.join(".git/HEAD"), "x").unwrap();
        fs::write(proj.join("__pycache__/m.pyc"), "x").unwrap();
        fs::write(proj.join("env/pyvenv.cfg"), "home=/").unwrap();
        fs::write(proj.join("env/lib/x.py"), "").unwrap();
        fs::write(proj.join("big.bin"), vec![0u8; 2048]).unwrap();
        fs::write(root.path().join("other.py"), "").unwrap();
        #[cfg(unix)]
        std::os::unix::fs::symlink("/etc/passwd", proj.join("link")).unwrap();
        let limits = SnapshotLimits {
            max_file_bytes: 1024,
            max_entries: 1000,
            max_archive_bytes: 1 << 20,
            max_read_bytes: 1 << 20,
        };
        let snap = pack(&proj.join("main.py"), "proj/main.py", limits).unwrap();
        assert_eq!(snap.script, "main.py");
        assert_eq!(names(&snap.archive), ["main.py", "sub/data.csv"]);
        assert_eq!(snap.too_large, [("big.bin".to_owned(), 2048)]);

        let top = pack(&root.path().join("other.py"), "other.py", limits).unwrap();
        assert_eq!(names(&top.archive), ["other.py"]);
    }

    #[cfg(target_os = "linux")]
    fn contents(archive: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut tar = tar::Archive::new(flate2::read::GzDecoder::new(archive));
        tar.entries()
            .unwrap()
            .map(|e| {
                let mut e = e.unwrap();
                let name = e.path().unwrap().to_string_lossy().into_owned();
                let mut data = Vec::new();
                e.read_to_end(&mut data).unwrap();
                (name, data)
            })
            .collect()
    }

    /// A script running beside the server swaps a listed file, or a listed folder, for a link
    /// to a host file, or a file for a pipe, between the walk and the packing: the host's bytes
    /// never go into the snapshot and the packing does not wait on the pipe.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_or_folder_swapped_for_a_link_or_a_pipe_after_the_walk_is_not_followed() {
        use std::os::unix::fs::symlink;
        let root = tempfile::tempdir().unwrap();
        let host = root.path().join("host");
        fs::create_dir_all(host.join("sub")).unwrap();
        fs::write(host.join("secret"), "HOST-SECRET-BYTES").unwrap();
        fs::write(host.join("sub/inner"), "HOST-INNER-BYTES!").unwrap();
        let proj = root.path().join("proj");
        fs::create_dir_all(proj.join("sub")).unwrap();
        fs::write(proj.join("main.py"), "print(1)").unwrap();
        fs::write(proj.join("secret"), "project bytes....").unwrap();
        fs::write(proj.join("sub/inner"), "project inner....").unwrap();
        fs::write(proj.join("pipe"), "project pipe").unwrap();
        let limits = SnapshotLimits {
            max_file_bytes: 1024,
            max_entries: 1000,
            max_archive_bytes: 1 << 20,
            max_read_bytes: 1 << 20,
        };
        let listed = list(&proj, true, limits).unwrap();

        fs::remove_file(proj.join("secret")).unwrap();
        symlink(host.join("secret"), proj.join("secret")).unwrap();
        fs::rename(proj.join("sub"), root.path().join("moved")).unwrap();
        symlink(host.join("sub"), proj.join("sub")).unwrap();
        fs::remove_file(proj.join("pipe")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            proj.join("pipe"),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();

        let (done, packed) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = done.send(archive(&proj, listed.files, limits).map(|(a, ..)| a));
        });
        let archive = packed
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("the packing waits on a pipe swapped in after the walk")
            .unwrap();
        for (name, data) in contents(&archive) {
            let text = String::from_utf8_lossy(&data);
            assert!(!text.contains("HOST"), "{name} holds a host file: {text}");
        }
    }

    /// A project of many files that hardly compress, or of sparse files that compress to
    /// nothing, stops the packing near the request limit instead of making the server read and
    /// hold all of it.
    #[test]
    fn packing_stops_at_the_archive_and_read_limits() {
        let root = tempfile::tempdir().unwrap();
        let proj = root.path().join("proj");
        fs::create_dir_all(&proj).unwrap();
        fs::write(proj.join("main.py"), "print(1)").unwrap();
        let mut noise = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..64 {
            let data: Vec<u8> = (0..64 * 1024)
                .map(|_| {
                    noise ^= noise << 13;
                    noise ^= noise >> 7;
                    noise ^= noise << 17;
                    noise as u8
                })
                .collect();
            fs::write(proj.join(format!("noise{i:02}.bin")), data).unwrap();
            let sparse = fs::File::create(proj.join(format!("zeros{i:02}.bin"))).unwrap();
            sparse.set_len(1 << 20).unwrap();
        }
        let limits = SnapshotLimits {
            max_file_bytes: 1 << 20,
            max_entries: 1000,
            max_archive_bytes: 256 * 1024,
            max_read_bytes: 1 << 40,
        };
        let snap = pack(&proj.join("main.py"), "proj/main.py", limits).unwrap();
        assert!(snap.over_limit);
        assert!(snap.archive.len() < 512 * 1024, "{}", snap.archive.len());
        assert_eq!(
            snap.files.len(),
            129,
            "every file that would have gone is named"
        );

        fs::remove_file(proj.join("noise00.bin")).unwrap();
        for i in 1..64 {
            fs::remove_file(proj.join(format!("noise{i:02}.bin"))).unwrap();
        }
        let limits = SnapshotLimits {
            max_archive_bytes: 1 << 30,
            max_read_bytes: 8 << 20,
            ..limits
        };
        let snap = pack(&proj.join("main.py"), "proj/main.py", limits).unwrap();
        assert!(
            snap.over_limit,
            "64 MiB of zeros read past an 8 MiB read limit"
        );

        let limits = SnapshotLimits {
            max_read_bytes: 1 << 30,
            ..limits
        };
        let snap = pack(&proj.join("main.py"), "proj/main.py", limits).unwrap();
        assert!(!snap.over_limit);
        assert_eq!(names(&snap.archive).len(), 65);
    }
}
