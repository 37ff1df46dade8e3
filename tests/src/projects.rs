//! A projects folder for one test, in a temporary folder removed on drop: the files a test's
//! scripts need inside it, and whatever a test aims at beside it (the target of a path escape).
//! For the sample projects, see [`projects_copy`](crate::projects_copy).

use std::path::{Path, PathBuf};

/// `BASE/NAME`, the projects folder, inside a new temporary `BASE` (its path canonical, as the
/// server reports paths): built with [`file`](Self::file) and [`outside`](Self::outside).
pub struct TempProjects {
    base: tempfile::TempDir,
    /// `BASE`, canonical.
    root: PathBuf,
    projects: PathBuf,
}

impl TempProjects {
    /// An empty projects folder `BASE/name`.
    pub fn named(name: &str) -> Self {
        let base = tempfile::tempdir().expect("create a temporary folder");
        let root = dunce::canonicalize(base.path()).expect("the temporary folder exists");
        // Open to pass through: a test may run its server as another user, after making the
        // projects folder (not this one) that user's.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&root, std::fs::Permissions::from_mode(0o755))
                .expect("open the temporary folder to pass through");
        }
        let projects = root.join(name);
        std::fs::create_dir_all(&projects).expect("create the projects folder");
        Self {
            base,
            root,
            projects,
        }
    }

    /// Writes `content` to `rel` inside the projects folder (its folders made).
    pub fn file(self, rel: &str, content: impl AsRef<[u8]>) -> Self {
        write(&self.projects.join(rel), content.as_ref());
        self
    }

    /// Writes each `(rel, content)` inside the projects folder.
    pub fn files(self, files: &[(&str, &str)]) -> Self {
        files
            .iter()
            .fold(self, |projects, (rel, content)| projects.file(rel, content))
    }

    /// Makes the folder `rel` (and its parents) inside the projects folder.
    pub fn dir(self, rel: &str) -> Self {
        std::fs::create_dir_all(self.projects.join(rel)).expect("create a folder");
        self
    }

    /// Writes `content` to `rel` beside the projects folder, in `BASE`: outside what the server
    /// serves.
    pub fn outside(self, rel: &str, content: impl AsRef<[u8]>) -> Self {
        write(&self.root.join(rel), content.as_ref());
        self
    }

    /// Makes the folder `rel` beside the projects folder, in `BASE`.
    pub fn outside_dir(self, rel: &str) -> Self {
        std::fs::create_dir_all(self.root.join(rel)).expect("create a folder");
        self
    }

    /// The projects folder.
    pub fn path(&self) -> &Path {
        &self.projects
    }

    /// The temporary folder (removed on drop) and the projects folder inside it.
    pub fn into_parts(self) -> (tempfile::TempDir, PathBuf) {
        (self.base, self.projects)
    }
}

fn write(path: &Path, content: &[u8]) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("create a folder");
    }
    std::fs::write(path, content).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}
