//! The project's `.venv`: proven before an install (a real folder inside the projects folder, or
//! none yet; an existing one made from the server's `--python`), held by the project's open
//! folder, made there when missing (the venv step's commands), and removed again when the steps
//! that made it failed.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};

use super::step::Command;
use super::{InstallError, Installs, VENV_NAME};
use crate::paths::ProjectDir;

impl Installs {
    /// Proves the project's `.venv` (a real folder inside, or none yet; an existing one made
    /// from the server's `--python`) and holds the project's folder open for what follows.
    pub(super) fn prepare_venv(
        &self,
        project: &ProjectDir,
        venv: &Path,
    ) -> Result<VenvTarget, InstallError> {
        match std::fs::symlink_metadata(venv) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(InstallError::Venv(e)),
            Ok(meta) if meta.file_type().is_symlink() => return Err(InstallError::VenvIsLink),
            Ok(meta) if !meta.is_dir() => return Err(InstallError::VenvNotDir),
            Ok(_) => {
                self.check_venv_dir(venv)?;
                // An empty folder (an install that failed before it made anything) is made anew.
                let empty = std::fs::read_dir(venv)
                    .map_err(InstallError::Venv)?
                    .next()
                    .is_none();
                if !empty {
                    self.check_base_interpreter(venv)?;
                }
            }
        }
        VenvTarget::open_project(&self.projects, project)
    }

    /// `venv` is a real folder whose real path is itself, inside the projects folder.
    fn check_venv_dir(&self, venv: &Path) -> Result<(), InstallError> {
        let meta = std::fs::symlink_metadata(venv).map_err(InstallError::Venv)?;
        if meta.file_type().is_symlink() {
            return Err(InstallError::VenvIsLink);
        }
        if !meta.is_dir() {
            return Err(InstallError::VenvNotDir);
        }
        let real = dunce::canonicalize(venv).map_err(InstallError::Venv)?;
        if real != venv || !real.starts_with(&self.projects) || real == self.projects {
            return Err(InstallError::VenvOutside);
        }
        Ok(())
    }

    /// An existing venv's `bin/python` must resolve to the server's interpreter: the install
    /// starts it.
    fn check_base_interpreter(&self, venv: &Path) -> Result<(), InstallError> {
        let python = venv.join("bin").join("python");
        let real = std::fs::canonicalize(&python)
            .map_err(|e| InstallError::ForeignVenv(format!("bin/python: {e}")))?;
        let ours = std::fs::canonicalize(&self.settings.python)
            .unwrap_or_else(|_| self.settings.python.clone());
        if real != ours {
            return Err(InstallError::ForeignVenv(format!(
                "bin/python is {}",
                real.display()
            )));
        }
        Ok(())
    }

    /// The steps that make the venv: uv's one, or `venv` without pip then `ensurepip` (its own
    /// step, so that its output reaches the caller: `venv` swallows it).
    pub(super) fn venv_commands(&self, venv: &Path) -> Vec<Command> {
        match &self.settings.uv {
            Some(uv) => vec![Command::new(uv).args([
                OsStr::new("--no-config"),
                OsStr::new("--color"),
                OsStr::new("never"),
                OsStr::new("venv"),
                OsStr::new("--no-python-downloads"),
                OsStr::new("--python"),
                self.settings.python.as_os_str(),
                venv.as_os_str(),
            ])],
            None => vec![
                Command::new(&self.settings.python).args([
                    OsStr::new("-m"),
                    OsStr::new("venv"),
                    OsStr::new("--without-pip"),
                    venv.as_os_str(),
                ]),
                Command::new(&venv.join("bin").join("python")).args([
                    OsStr::new("-m"),
                    OsStr::new("ensurepip"),
                    OsStr::new("--default-pip"),
                ]),
            ],
        }
    }
}

/// The project's folder, held open (reached beneath the projects folder, no link on the way),
/// where its `.venv` is made, opened and, unfinished, removed: a run that swaps the project's
/// folder for a link meanwhile changes nothing of that.
pub(super) struct VenvTarget {
    project: std::fs::File,
}

impl VenvTarget {
    fn open_project(projects: &Path, project: &ProjectDir) -> Result<Self, InstallError> {
        let project = match project.relative() {
            "" | "." => std::fs::File::open(projects),
            relative => crate::paths::open_beneath(projects, Path::new(relative)),
        };
        match project {
            Ok(project) => Ok(Self { project }),
            Err(e) if e.raw_os_error() == Some(libc_eloop()) => Err(InstallError::VenvOutside),
            Err(e) => Err(InstallError::Venv(e)),
        }
    }

    /// Makes `.venv` when missing and opens it (never through a link); true when it was made
    /// here, or was an empty folder.
    #[cfg(target_os = "linux")]
    pub(super) fn open(&self) -> Result<(std::fs::File, bool), InstallError> {
        use rustix::fs::{mkdirat, openat, Mode, OFlags};
        let made = match mkdirat(&self.project, VENV_NAME, Mode::from_raw_mode(0o755)) {
            Ok(()) => true,
            Err(rustix::io::Errno::EXIST) => false,
            Err(e) => return Err(InstallError::Venv(e.into())),
        };
        let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let venv = match openat(&self.project, VENV_NAME, flags, Mode::empty()) {
            Ok(fd) => std::fs::File::from(fd),
            Err(rustix::io::Errno::LOOP) => return Err(InstallError::VenvIsLink),
            Err(rustix::io::Errno::NOTDIR) => return Err(InstallError::VenvNotDir),
            Err(e) => return Err(InstallError::Venv(e.into())),
        };
        let empty = std::fs::read_dir(fd_path(&venv))
            .map_err(InstallError::Venv)?
            .next()
            .is_none();
        Ok((venv, made || empty))
    }

    #[cfg(not(target_os = "linux"))]
    pub(super) fn open(&self) -> Result<(std::fs::File, bool), InstallError> {
        let _ = &self.project;
        Err(InstallError::Unsupported)
    }
}

/// `ELOOP`: `openat2` met a link on the way.
fn libc_eloop() -> i32 {
    #[cfg(unix)]
    return libc::ELOOP;
    #[cfg(not(unix))]
    return 40;
}

/// The path of an open file's descriptor (Linux's magic link to that very file).
pub(super) fn fd_path(file: &std::fs::File) -> PathBuf {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()))
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        PathBuf::new()
    }
}

/// A venv being made: removed on drop unless it was finished, through the project's open
/// folder and only while `.venv` there is still the folder made (same device and inode).
pub(super) struct UnfinishedVenv<'a> {
    target: &'a VenvTarget,
    made: Option<(u64, u64)>,
}

impl<'a> UnfinishedVenv<'a> {
    pub(super) fn new(target: &'a VenvTarget, venv: &std::fs::File) -> Self {
        Self {
            target,
            made: identity(venv),
        }
    }

    pub(super) fn finished(&mut self) {
        self.made = None;
    }
}

/// A file's (device, inode).
fn identity(file: &std::fs::File) -> Option<(u64, u64)> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        file.metadata().ok().map(|m| (m.dev(), m.ino()))
    }
    #[cfg(not(unix))]
    {
        let _ = file;
        None
    }
}

impl Drop for UnfinishedVenv<'_> {
    fn drop(&mut self) {
        let Some(made) = self.made else { return };
        #[cfg(not(unix))]
        let _ = made;
        let venv = fd_path(&self.target.project).join(VENV_NAME);
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            match std::fs::symlink_metadata(&venv) {
                Ok(m) if m.is_dir() && (m.dev(), m.ino()) == made => {}
                _ => {
                    tracing::warn!("a half-made venv was replaced meanwhile: left alone");
                    return;
                }
            }
        }
        // `remove_dir_all` removes a link put in its place, never what the link points to.
        if let Err(e) = std::fs::remove_dir_all(&venv) {
            tracing::warn!(%e, "a half-made venv was not removed");
        }
    }
}
