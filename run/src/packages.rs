//! What an environment has installed, read from its metadata without starting anything: each
//! `*.dist-info/METADATA` (or `*.egg-info/PKG-INFO`, or an `.egg-info` file) of its
//! site-packages folders gives a `Name` and a `Version`; a file that does not gives them from the
//! folder's name (`name-1.0.dist-info`).
//!
//! A venv's site-packages are inside the projects folder, where runs write (a run elsewhere may
//! even swap a folder for a link while this reads): on Linux such a folder is opened with
//! `openat2` beneath the projects folder with no link at all on the way, and each metadata file
//! beneath it likewise; elsewhere, entries are taken only as real folders and files and a file is
//! opened without following a last link. Nothing blocks on a FIFO, and only the first 64 KiB of a
//! file are read (the headers are at the top). The base interpreter's own folders (the
//! operator's) are read plainly.

use std::fs;
use std::io::Read as _;
use std::path::{Path, PathBuf};

/// The most of one metadata file read: its headers come first.
const MAX_METADATA_BYTES: u64 = 64 << 10;
/// Entries looked at per site-packages folder at most.
const MAX_ENTRIES: usize = 20_000;

/// One installed distribution.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Package {
    pub name: String,
    pub version: String,
}

/// The distributions in `site_packages` (in Python's order: the first folder holding a name
/// wins), sorted by normalized name, one per name. Folders inside `untrusted` (the projects
/// folder) are read without following any link on the way.
pub fn installed(site_packages: &[PathBuf], untrusted: &Path) -> Vec<Package> {
    // By normalized name: the first folder's wins, the map keeps them sorted.
    let mut found: std::collections::BTreeMap<String, Package> = std::collections::BTreeMap::new();
    for dir in site_packages {
        let Some(folder) = Folder::open(dir, untrusted) else {
            continue;
        };
        for (name, kind) in folder.entries() {
            let Some(package) = read_entry(&folder, &name, kind) else {
                continue;
            };
            found.entry(normalize(&package.name)).or_insert(package);
        }
    }
    found.into_values().collect()
}

/// What an entry is, never through a link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Dir,
    File,
    Other,
}

/// A site-packages folder being read.
enum Folder {
    /// By path: the operator's folders (and, off Linux, every folder).
    Plain(PathBuf),
    /// Linux, inside the projects folder: an fd opened beneath it with no link on the way.
    #[cfg(target_os = "linux")]
    Beneath(std::os::fd::OwnedFd),
}

impl Folder {
    fn open(dir: &Path, untrusted: &Path) -> Option<Self> {
        #[cfg(target_os = "linux")]
        if let Ok(relative) = dir.strip_prefix(untrusted) {
            use rustix::fs::{openat2, Mode, OFlags};
            let root = rustix::fs::open(
                untrusted,
                OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .ok()?;
            let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            return match openat2(&root, relative, flags, Mode::empty(), no_links()) {
                Ok(fd) => Some(Self::Beneath(fd)),
                // Kernels before 5.6: the last component is still never followed.
                Err(rustix::io::Errno::NOSYS) => rustix::fs::open(dir, flags, Mode::empty())
                    .ok()
                    .map(Self::Beneath),
                Err(_) => None,
            };
        }
        #[cfg(not(target_os = "linux"))]
        let _ = untrusted;
        Some(Self::Plain(dir.to_path_buf()))
    }

    /// Its entries (at most [`MAX_ENTRIES`]) with their kinds, links not followed.
    fn entries(&self) -> Vec<(String, Kind)> {
        match self {
            Self::Plain(dir) => {
                let Ok(entries) = fs::read_dir(dir) else {
                    return Vec::new();
                };
                entries
                    .flatten()
                    .take(MAX_ENTRIES)
                    .filter_map(|entry| {
                        let kind = match entry.file_type().ok()? {
                            t if t.is_dir() => Kind::Dir,
                            t if t.is_file() => Kind::File,
                            _ => Kind::Other,
                        };
                        Some((entry.file_name().into_string().ok()?, kind))
                    })
                    .collect()
            }
            #[cfg(target_os = "linux")]
            Self::Beneath(fd) => {
                use rustix::fs::{AtFlags, FileType};
                let Ok(mut dir) = rustix::fs::Dir::read_from(fd) else {
                    return Vec::new();
                };
                let mut found = Vec::new();
                while let Some(Ok(entry)) = dir.read() {
                    if found.len() >= MAX_ENTRIES {
                        break;
                    }
                    let Ok(name) = entry.file_name().to_str() else {
                        continue;
                    };
                    if name == "." || name == ".." {
                        continue;
                    }
                    let kind = match entry.file_type() {
                        FileType::Unknown => {
                            rustix::fs::statat(fd, name, AtFlags::SYMLINK_NOFOLLOW)
                                .map_or(FileType::Unknown, |st| FileType::from_raw_mode(st.st_mode))
                        }
                        known => known,
                    };
                    let kind = match kind {
                        FileType::Directory => Kind::Dir,
                        FileType::RegularFile => Kind::File,
                        _ => Kind::Other,
                    };
                    found.push((name.to_owned(), kind));
                }
                found
            }
        }
    }

    /// Opens `relative` (an entry, or a file in one) for reading: never through a link, never
    /// blocking on a FIFO; a regular file only.
    fn open_file(&self, relative: &str) -> Option<fs::File> {
        let file = match self {
            Self::Plain(dir) => {
                let mut options = fs::OpenOptions::new();
                options.read(true);
                #[cfg(unix)]
                std::os::unix::fs::OpenOptionsExt::custom_flags(
                    &mut options,
                    libc::O_NOFOLLOW | libc::O_NONBLOCK,
                );
                options.open(dir.join(relative)).ok()?
            }
            #[cfg(target_os = "linux")]
            Self::Beneath(fd) => {
                use rustix::fs::{openat2, Mode, OFlags};
                let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
                let opened = match openat2(fd, relative, flags, Mode::empty(), no_links()) {
                    Err(rustix::io::Errno::NOSYS) => {
                        rustix::fs::openat(fd, relative, flags, Mode::empty())
                    }
                    other => other,
                };
                fs::File::from(opened.ok()?)
            }
        };
        file.metadata().ok()?.is_file().then_some(file)
    }
}

#[cfg(target_os = "linux")]
fn no_links() -> rustix::fs::ResolveFlags {
    use rustix::fs::ResolveFlags;
    ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS
}

/// The package an entry of a site-packages folder describes, if it is metadata.
fn read_entry(folder: &Folder, name: &str, kind: Kind) -> Option<Package> {
    let (stem, metadata) = if let Some(stem) = name.strip_suffix(".dist-info") {
        (
            stem,
            (kind == Kind::Dir).then(|| format!("{name}/METADATA"))?,
        )
    } else if let Some(stem) = name.strip_suffix(".egg-info") {
        // An egg-info is a folder holding PKG-INFO, or the PKG-INFO itself.
        let file = match kind {
            Kind::Dir => format!("{name}/PKG-INFO"),
            Kind::File => name.to_owned(),
            Kind::Other => return None,
        };
        (stem, file)
    } else {
        return None;
    };
    let from_name = from_folder_name(stem);
    let headers = folder.open_file(&metadata).and_then(read_headers);
    let name = headers
        .as_ref()
        .and_then(|h| h.0.clone())
        .or_else(|| from_name.as_ref().map(|p| p.name.clone()))?;
    let version = headers
        .and_then(|h| h.1)
        .or_else(|| from_name.map(|p| p.version))
        .unwrap_or_default();
    Some(Package { name, version })
}

/// `Name` and `Version` of a metadata file (RFC 822 style headers, up to the first blank line).
fn read_headers(file: fs::File) -> Option<(Option<String>, Option<String>)> {
    let mut bytes = Vec::new();
    file.take(MAX_METADATA_BYTES).read_to_end(&mut bytes).ok()?;
    let text = String::from_utf8_lossy(&bytes);
    let (mut name, mut version) = (None, None);
    for line in text.lines() {
        if line.trim().is_empty() {
            break;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = clean(value);
        match key.trim().to_ascii_lowercase().as_str() {
            "name" if name.is_none() && !value.is_empty() => name = Some(value),
            "version" if version.is_none() && !value.is_empty() => version = Some(value),
            _ => {}
        }
    }
    Some((name, version))
}

/// `name-1.0` (a dist-info or egg-info folder's stem) as a package; the version may be absent
/// (`name.egg-info` of a development install).
fn from_folder_name(stem: &str) -> Option<Package> {
    let (name, version) = match stem.split_once('-') {
        Some((name, rest)) => (name, rest.split('-').next().unwrap_or("")),
        None => (stem, ""),
    };
    let name = clean(name);
    (!name.is_empty()).then(|| Package {
        name,
        version: clean(version),
    })
}

/// A header value as shown: trimmed, without control characters, at most 200 characters.
fn clean(value: &str) -> String {
    value
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(200)
        .collect()
}

/// PEP 503 normalization: `Foo_Bar.baz` and `foo-bar-baz` are one name.
fn normalize(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut dash = false;
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            dash = true;
        } else {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dist_info(dir: &Path, folder: &str, metadata: Option<&str>) {
        let path = dir.join(folder);
        fs::create_dir_all(&path).unwrap();
        if let Some(text) = metadata {
            fs::write(path.join("METADATA"), text).unwrap();
        }
    }

    #[test]
    fn names_and_versions_come_from_metadata_sorted_and_once_each() {
        let venv = tempfile::tempdir().unwrap();
        let base = tempfile::tempdir().unwrap();
        let (v, b) = (venv.path(), base.path());
        dist_info(
            v,
            "Zeta_Pkg-2.0.dist-info",
            Some("Metadata-Version: 2.1\nName: Zeta_Pkg\nVersion: 2.0\n\nName: not-this\n"),
        );
        dist_info(
            v,
            "alpha-1.0.dist-info",
            Some("Name: alpha\nVersion: 1.0\n"),
        );
        // No METADATA: the folder's name tells.
        dist_info(v, "bare-0.3.dist-info", None);
        fs::write(v.join("old-1.2.egg-info"), "Name: old\nVersion: 1.2\n").unwrap();
        fs::write(v.join("not_metadata.py"), "").unwrap();
        // The base's copy of a name the venv has is hidden by the venv's.
        dist_info(
            b,
            "alpha-0.1.dist-info",
            Some("Name: Alpha\nVersion: 0.1\n"),
        );
        dist_info(
            b,
            "base_only-5.dist-info",
            Some("Name: base-only\nVersion: 5\n"),
        );
        let found = installed(&[v.to_path_buf(), b.to_path_buf()], Path::new("/nowhere"));
        let shown: Vec<(&str, &str)> = found
            .iter()
            .map(|p| (p.name.as_str(), p.version.as_str()))
            .collect();
        assert_eq!(
            shown,
            [
                ("alpha", "1.0"),
                ("bare", "0.3"),
                ("base-only", "5"),
                ("old", "1.2"),
                ("Zeta_Pkg", "2.0"),
            ]
        );
    }

    #[cfg(unix)]
    #[test]
    fn links_are_not_followed() {
        let venv = tempfile::tempdir().unwrap();
        let secret = tempfile::tempdir().unwrap();
        fs::write(secret.path().join("METADATA"), "Name: secret\nVersion: 9\n").unwrap();
        std::os::unix::fs::symlink(secret.path(), venv.path().join("linked-1.dist-info")).unwrap();
        fs::create_dir_all(venv.path().join("file-1.dist-info")).unwrap();
        std::os::unix::fs::symlink(
            secret.path().join("METADATA"),
            venv.path().join("file-1.dist-info/METADATA"),
        )
        .unwrap();
        let wanted = [Package {
            name: "file".into(),
            version: "1".into(),
        }];
        // Read plainly or beneath the (untrusted) folder holding it: the linked folder is
        // skipped; the linked METADATA is not read (the name comes from the folder).
        let dir = dunce::canonicalize(venv.path()).unwrap();
        assert_eq!(
            installed(std::slice::from_ref(&dir), Path::new("/nowhere")),
            wanted
        );
        assert_eq!(
            installed(std::slice::from_ref(&dir), dir.parent().unwrap()),
            wanted
        );
        // A site-packages that is itself a link inside the untrusted folder is not read at all.
        let link = dir.with_extension("link");
        std::os::unix::fs::symlink(&dir, &link).unwrap();
        assert!(installed(std::slice::from_ref(&link), dir.parent().unwrap()).is_empty());
        std::fs::remove_file(link).unwrap();
    }
}
