//! The Python modules the server ships for runs (its matplotlib backend,
//! `python/_pyrun_mpl_backend.py`, and the session driver `python/_pyrun_session.py`), written
//! once at start-up into a private folder that the sandbox lets runs read but not write
//! (`SandboxPolicy::support`), in every sandbox mode.
//!
//! The folder is named like the runner's scratch roots (`pyrun-mcp-<pid>-…`): removed with the
//! server, and by a later server's sweep when this one could not (killed).

use std::io;
use std::path::{Path, PathBuf};

/// Each module's file name (the backend's is what `MPLBACKEND=module://…` names) and source.
const MODULES: &[(&str, &str)] = &[
    (
        "_pyrun_mpl_backend.py",
        include_str!("python/_pyrun_mpl_backend.py"),
    ),
    (
        super::session::SESSION_DRIVER,
        include_str!("python/_pyrun_session.py"),
    ),
    (
        super::warm::WARM_DRIVER,
        include_str!("python/_pyrun_warm.py"),
    ),
];

/// The written folder; removed on drop.
#[derive(Debug)]
pub struct PythonSupport {
    dir: PathBuf,
    _temp: tempfile::TempDir,
}

impl PythonSupport {
    /// Writes the modules into a new private folder of the temp folder.
    pub fn write() -> io::Result<Self> {
        let temp = tempfile::Builder::new()
            .prefix(&format!("pyrun-mcp-{}-support-", std::process::id()))
            .tempdir()?;
        for (name, source) in MODULES {
            let mut options = std::fs::OpenOptions::new();
            options.write(true).create_new(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o400);
            io::Write::write_all(
                &mut options.open(temp.path().join(name))?,
                source.as_bytes(),
            )?;
        }
        let dir = dunce::canonicalize(temp.path())?;
        Ok(Self { dir, _temp: temp })
    }

    /// The folder's host path (canonical).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_backend_is_written_read_only_and_removed_with_the_server() {
        let support = PythonSupport::write().unwrap();
        let file = support.dir().join("_pyrun_mpl_backend.py");
        let source = std::fs::read_to_string(&file).unwrap();
        assert!(source.contains("def show("), "{source}");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&file).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o400, "{mode:o}");
        }
        let dir = support.dir().to_path_buf();
        drop(support);
        assert!(!dir.exists());
    }
}
