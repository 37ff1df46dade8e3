//! A project's `uv.lock` synced (uv only): the lock as `uv_lock.rs` checked it and a minimal
//! `pyproject.toml` written into the install's scratch (the profiles cannot read the project's
//! folder, and its own pyproject's `[tool.uv]` must not reach uv), then `uv sync --frozen` of
//! that scratch project, online into the fetch step's throwaway venv, `--offline` into the
//! project's venv.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::Path;

use super::step::Command;
use super::{InstallError, Installs};
use crate::uv_lock::CheckedLock;

/// The checked lock and the pyproject made from it, in the install's scratch: what `uv sync`
/// reads instead of the project's own files.
pub(super) fn write_sync_project(scratch: &Path, lock: &CheckedLock) -> io::Result<()> {
    std::fs::write(scratch.join("uv.lock"), lock.text())?;
    std::fs::write(scratch.join("pyproject.toml"), lock.pyproject())
}

impl Installs {
    /// `uv sync` of the lock and pyproject in `scratch` into `venv` (see the module header);
    /// `--offline` from the cache the fetch step filled, unless `online`.
    pub(super) fn sync_command(
        &self,
        venv: &Path,
        cache: &Path,
        scratch: &Path,
        online: bool,
    ) -> Result<Command, InstallError> {
        let uv = self
            .settings
            .uv
            .as_deref()
            .ok_or(InstallError::LockNeedsUv)?;
        let python = venv.join("bin").join("python");
        let mut cmd = Self::uv(uv, cache).args([
            OsStr::new("sync"),
            OsStr::new("--frozen"),
            OsStr::new("--no-install-project"),
            OsStr::new("--no-python-downloads"),
            OsStr::new("--python"),
            python.as_os_str(),
            OsStr::new("--project"),
            scratch.as_os_str(),
        ]);
        if !online {
            cmd = cmd.args([OsStr::new("--offline")]);
        }
        if !self.settings.allow_sdist {
            cmd = cmd.args([OsStr::new("--no-build")]);
        }
        cmd.env.push((
            OsString::from("UV_PROJECT_ENVIRONMENT"),
            venv.as_os_str().to_os_string(),
        ));
        Ok(cmd)
    }
}
