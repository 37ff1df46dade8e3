//! What an environment has installed, read from its metadata without starting anything: each
//! `*.dist-info/METADATA` (or `*.egg-info/PKG-INFO`, or an `.egg-info` file) of its
//! site-packages folders gives a `Name` and a `Version`; a file that does not gives them from the
//! folder's name (`name-1.0.dist-info`).
//!
//! A venv's site-packages are inside the projects folder, where runs write: entries are taken
//! only as real folders and files (no link is followed), metadata is opened without following a
//! link or blocking on a FIFO, and only its first 64 KiB are read (the header is at the top).

use std::fs;
use std::io::Read as _;
use std::path::Path;

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
/// wins), sorted by normalized name, one per name.
pub fn installed(site_packages: &[impl AsRef<Path>]) -> Vec<Package> {
    let mut found: Vec<(String, Package)> = Vec::new();
    for dir in site_packages {
        let Ok(entries) = fs::read_dir(dir.as_ref()) else {
            continue;
        };
        for entry in entries.flatten().take(MAX_ENTRIES) {
            let Some(package) = read_entry(&entry) else {
                continue;
            };
            let key = normalize(&package.name);
            if !found.iter().any(|(k, _)| *k == key) {
                found.push((key, package));
            }
        }
    }
    found.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
    found.into_iter().map(|(_, package)| package).collect()
}

/// The package a site-packages entry describes, if it is metadata.
fn read_entry(entry: &fs::DirEntry) -> Option<Package> {
    let file_name = entry.file_name();
    let name = file_name.to_str()?;
    let kind = entry.file_type().ok()?;
    let (stem, metadata) = if let Some(stem) = name.strip_suffix(".dist-info") {
        (stem, kind.is_dir().then(|| entry.path().join("METADATA"))?)
    } else if let Some(stem) = name.strip_suffix(".egg-info") {
        // An egg-info is a folder holding PKG-INFO, or the PKG-INFO itself.
        let file = if kind.is_dir() {
            entry.path().join("PKG-INFO")
        } else if kind.is_file() {
            entry.path()
        } else {
            return None;
        };
        (stem, file)
    } else {
        return None;
    };
    let from_name = from_folder_name(stem);
    let headers = read_headers(&metadata);
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
fn read_headers(path: &Path) -> Option<(Option<String>, Option<String>)> {
    let mut options = fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        libc::O_NOFOLLOW | libc::O_NONBLOCK,
    );
    let file = options.open(path).ok()?;
    if !file.metadata().ok()?.is_file() {
        return None;
    }
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
        let found = installed(&[v, b]);
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
        let found = installed(&[venv.path()]);
        // The linked folder is skipped; the linked METADATA is not read (the name comes from the
        // folder).
        assert_eq!(
            found,
            [Package {
                name: "file".into(),
                version: "1".into()
            }]
        );
    }
}
