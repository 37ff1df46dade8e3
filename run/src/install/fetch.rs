//! The fetch step, the only one with the network: only what the server made runs (uv, or a
//! throwaway venv of the install's own scratch that no run can reach), never the project's venv,
//! which any run of another folder can write (see `mod.rs`). With uv it fills the project's uv
//! cache; with pip it leaves wheels in the scratch.

use std::ffi::{OsStr, OsString};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyrun_sandbox::{Grant, Sandbox};

use super::step::{Command, Steps};
use super::{InstallError, Installs, Wanted};
use crate::paths::ProjectDir;
use crate::supervise::Ending;

/// The throwaway venv of the fetch step, in the install's scratch.
const FETCH_VENV: &str = "fetch-venv";
/// Where the pip fetch step leaves the wheels, in the install's scratch.
pub(super) const WHEELS_DIR: &str = "wheels";

impl Installs {
    /// Runs the fetch step's commands one after the other in the `online` sandbox, with `cache`
    /// writable; how the first that did not succeed ended (or the last's success).
    pub(super) async fn fetch(
        &self,
        steps: &Steps<'_>,
        online: &Sandbox,
        cache: &Path,
        wanted: &Wanted<'_>,
    ) -> Result<Ending, InstallError> {
        let slot = online
            .slot_granting(steps.scratch, &[Grant::writable(cache)])
            .map_err(|e| InstallError::Sandbox(Arc::new(e)))?;
        let commands = self.fetch_commands(steps.scratch, cache, wanted)?;
        let ended = steps.run_each(online, &slot, commands).await?;
        // The slot ends here, before the offline steps take one (on Linux its cgroup and view
        // go; elsewhere it holds nothing to drop).
        #[cfg_attr(not(target_os = "linux"), allow(clippy::drop_non_drop))]
        drop(slot);
        Ok(ended)
    }

    /// The cache the fetch fills. With `--allow-sdist` a fetch runs build backends with the
    /// network: never from a cache that code of the project's venv could write (see `mod.rs`),
    /// so such an install fetches into a fresh cache of its own, removed with the returned
    /// folder. It lies beside the scratch, not in it: the file view binds each granted folder
    /// at its own path, and one inside another granted folder cannot be bound on its own.
    pub(super) fn fetch_cache(
        &self,
        project: &ProjectDir,
    ) -> Result<(PathBuf, Option<tempfile::TempDir>), InstallError> {
        if self.settings.allow_sdist {
            let cache = tempfile::Builder::new()
                .prefix("sdist-cache-")
                .tempdir_in(self.root.path())
                .map_err(InstallError::Scratch)?;
            Ok((cache.path().to_path_buf(), Some(cache)))
        } else {
            let cache = self.project_cache(project).map_err(InstallError::Scratch)?;
            Ok((cache, None))
        }
    }

    /// The project's own cache folder (made owner-only when missing): no install writes
    /// another project's cache, so a project's planted venv (see the module header) cannot
    /// poison what other projects install.
    fn project_cache(&self, project: &ProjectDir) -> io::Result<PathBuf> {
        use std::hash::{Hash, Hasher};
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        project.relative().hash(&mut hasher);
        let dir = self.cache.join(format!("project-{:016x}", hasher.finish()));
        #[cfg_attr(not(unix), allow(unused_mut))]
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        match builder.create(&dir) {
            Err(e) if e.kind() != io::ErrorKind::AlreadyExists => return Err(e),
            _ => {}
        }
        if std::fs::symlink_metadata(&dir)?.file_type().is_symlink() {
            return Err(io::Error::other("the project's cache folder is a link"));
        }
        Ok(dir)
    }

    /// The fetch step's commands: the requirements and their dependencies resolved against the
    /// index and downloaded, by uv into its cache (installed into a throwaway venv of the
    /// scratch), or by a throwaway venv's pip as wheels into the scratch (`pip wheel`: built
    /// there, with `--allow-sdist`).
    fn fetch_commands(
        &self,
        scratch: &Path,
        cache: &Path,
        wanted: &Wanted<'_>,
    ) -> Result<Vec<Command>, InstallError> {
        let fetch_venv = scratch.join(FETCH_VENV);
        let mut commands = self.venv_commands(&fetch_venv);
        let requirements = match wanted {
            Wanted::Requirements(requirements) => *requirements,
            Wanted::Lock(_) => {
                commands.push(self.sync_command(&fetch_venv, cache, scratch, true)?);
                return Ok(commands);
            }
        };
        let python = fetch_venv.join("bin").join("python");
        let index = OsStr::new(self.settings.index.url());
        let requirements = requirements.iter().map(|r| OsString::from(r.to_arg()));
        let fetch = match &self.settings.uv {
            Some(uv) => {
                let mut cmd = self
                    .uv_pip_install(uv, cache, &python)
                    .args([OsStr::new("--index-url"), index]);
                if !self.settings.allow_sdist {
                    cmd = cmd.args([OsStr::new("--no-build")]);
                }
                cmd.owned_args(requirements)
            }
            None => {
                let mut cmd = Command::new(&python).args([
                    OsStr::new("-m"),
                    OsStr::new("pip"),
                    OsStr::new("wheel"),
                    OsStr::new("--isolated"),
                    OsStr::new("--no-input"),
                    OsStr::new("--disable-pip-version-check"),
                    OsStr::new("--progress-bar"),
                    OsStr::new("off"),
                    OsStr::new("--cache-dir"),
                    cache.join("pip").as_os_str(),
                    OsStr::new("--wheel-dir"),
                    scratch.join(WHEELS_DIR).as_os_str(),
                    OsStr::new("--index-url"),
                    index,
                ]);
                if !self.settings.allow_sdist {
                    cmd = cmd.args([OsStr::new("--only-binary"), OsStr::new(":all:")]);
                }
                cmd.owned_args(requirements)
            }
        };
        commands.push(fetch);
        Ok(commands)
    }
}
