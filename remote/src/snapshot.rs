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
    let mut walk = Walk {
        limits,
        files: Vec::new(),
        too_large: Vec::new(),
        entries: 0,
    };
    walk.folder(&top, "", recurse)?;
    let mut tar = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::default()));
    for (name, path, size) in &walk.files {
        let mut header = tar::Header::new_gnu();
        header.set_size(*size);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        // A file that changed size since it was listed is read at its listed size (cut, or
        // padded with zeros): the header is already written.
        let file = fs::File::open(path)?;
        tar.append_data(
            &mut header,
            name,
            file.take(*size).chain(std::io::repeat(0)).take(*size),
        )?;
    }
    let mut gz = tar.into_inner()?;
    gz.flush()?;
    let archive = gz.finish()?;
    let mut files: Vec<(String, u64)> = walk.files.into_iter().map(|(n, _, s)| (n, s)).collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.1));
    Ok(Snapshot {
        archive,
        script: script_inside,
        files,
        too_large: walk.too_large,
    })
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
        };
        let snap = pack(&proj.join("main.py"), "proj/main.py", limits).unwrap();
        assert_eq!(snap.script, "main.py");
        assert_eq!(names(&snap.archive), ["main.py", "sub/data.csv"]);
        assert_eq!(snap.too_large, [("big.bin".to_owned(), 2048)]);

        let top = pack(&root.path().join("other.py"), "other.py", limits).unwrap();
        assert_eq!(names(&top.archive), ["other.py"]);
    }
}
