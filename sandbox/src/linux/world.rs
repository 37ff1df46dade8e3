//! The minimal world of a run's file view: which host paths exist for it at all, as steps of a
//! [`MountPlan`](super::mount::MountPlan). Pure: it reads the host's file types and links, and
//! decides; the building child executes.
//!
//! Why: a view made of every top-level folder of the host, read-only, still let a run `stat` any
//! path (the home folder, `/etc/shadow`, the audit log's size), put inotify watches on them and
//! read the host's layout from `PATH`: Landlock governs opening, not looking up. Here a run's root
//! is an empty tmpfs, and only what a run may read anyway is bound into it, at its host path:
//! the system trees and files of Landlock's read list (`/usr` and `/lib*` whole, a listed set of
//! `/etc` files, name-resolution files only with the network), the interpreter's trees, the
//! devices a run may use. Everything else does not exist (`ENOENT`).
//!
//! A tree deep in a folder that is not shown (an interpreter under `~/.pyenv`) gets empty stub
//! parents: the run sees `/root/.pyenv/versions/3.12`, not the rest of that home. A symlink on
//! the way is copied as a link and its target shown too, so paths resolve as on the host. The
//! stubs live in the view's tmpfs and are made read-only with everything else: nothing is ever
//! created on the host.

use std::collections::BTreeSet;
use std::io;
use std::path::{Component, Path, PathBuf};

use super::mount_op::{cstring, under, Op};

/// How many links a shown path may pass through before it is given up (a loop).
const MAX_LINKS: usize = 16;

/// The world under construction: the ops that make it, and what it holds so far.
#[derive(Debug, Default)]
pub(super) struct World {
    pub(super) ops: Vec<Op>,
    /// Folders made in the tmpfs (stubs and mount points).
    made: BTreeSet<PathBuf>,
    /// Links copied into the tmpfs.
    links: BTreeSet<PathBuf>,
    /// Host trees and files bound at their own paths.
    bound: Vec<PathBuf>,
    /// The host folders of [`Op::Place`], by index: the server may attach an idmapped clone
    /// of each instead of a plain bind.
    pub(super) placed: Vec<PathBuf>,
}

impl World {
    /// Shows each of `paths` (absolute host paths; missing ones are skipped) at its own path,
    /// shallow ones first so that a tree already shown covers what lies in it.
    pub(super) fn show_all<'a>(
        &mut self,
        paths: impl IntoIterator<Item = &'a Path>,
    ) -> io::Result<()> {
        let mut paths: Vec<&Path> = paths.into_iter().collect();
        paths.sort_by_key(|p| (p.components().count(), p.to_path_buf()));
        paths.dedup();
        for path in paths {
            self.show(path, 0)?;
        }
        Ok(())
    }

    /// True when `path` is inside a tree already bound (it exists there as on the host).
    pub(super) fn covers(&self, path: &Path) -> bool {
        self.bound.iter().any(|b| path.starts_with(b))
    }

    /// Makes `path` (absolute, in the view) an empty folder with stub parents, unless it exists.
    pub(super) fn stub_dir(&mut self, path: &Path) -> io::Result<()> {
        let mut at = PathBuf::from("/");
        for part in path
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
        {
            at.push(part);
            if self.covers(&at) || self.links.contains(&at) {
                return Err(io::Error::other(format!(
                    "{} is shown from the host and cannot hold a mount point",
                    at.display()
                )));
            }
            if self.made.insert(at.clone()) {
                self.ops.push(Op::Mkdir(under("/newroot", &at)?));
            }
        }
        Ok(())
    }

    /// Binds `source` (a host path, or a magic link the building child holds) at `at` in the
    /// view: a folder or file. Inside a tree already shown, the mount point exists and nothing
    /// is made; elsewhere stub parents are.
    pub(super) fn bind_at(&mut self, source: &Path, at: &Path, dir: bool) -> io::Result<()> {
        if !self.covers(at) {
            if dir {
                self.stub_dir(at)?;
            } else {
                if let Some(parent) = at.parent() {
                    self.stub_dir(parent)?;
                }
                self.ops.push(Op::File(under("/newroot", at)?));
            }
        }
        self.ops.push(Op::Bind {
            from: under("/oldroot", source)?,
            to: under("/newroot", at)?,
        });
        self.bound.push(at.to_path_buf());
        Ok(())
    }

    /// [`World::bind_at`] for a folder runs must own (`idmap.rs`): an [`Op::Place`].
    pub(super) fn place_at(&mut self, source: &Path, at: &Path) -> io::Result<()> {
        self.bind_at(source, at, true)?;
        if let Some(Op::Bind { from, to }) = self.ops.pop() {
            self.ops.push(Op::Place {
                from,
                to,
                clone: self.placed.len(),
            });
            self.placed.push(source.to_path_buf());
        }
        Ok(())
    }

    fn show(&mut self, path: &Path, depth: usize) -> io::Result<()> {
        if depth > MAX_LINKS || self.covers(path) || !path.is_absolute() {
            return Ok(());
        }
        // The parents: stubs, or a link whose target is shown in its place.
        let mut at = PathBuf::from("/");
        let parts: Vec<_> = path
            .components()
            .filter(|c| matches!(c, Component::Normal(_)))
            .collect();
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            if self.covers(&at) {
                return Ok(());
            }
            let Ok(meta) = std::fs::symlink_metadata(&at) else {
                return Ok(()); // missing on the host: nothing to show
            };
            let last = i + 1 == parts.len();
            if meta.file_type().is_symlink() {
                if self.links.insert(at.clone()) {
                    self.ops.push(Op::Symlink {
                        target: cstring(&std::fs::read_link(&at)?)?,
                        path: under("/newroot", &at)?,
                    });
                }
                // The rest of the path resolves through the link: show where it leads.
                return match std::fs::canonicalize(path) {
                    Ok(real) => self.show(&real, depth + 1),
                    Err(_) => Ok(()),
                };
            }
            if last {
                let kind = meta.file_type();
                // Files and device nodes alike are bound onto an empty file.
                self.bind_at(&at, &at, kind.is_dir())?;
            } else if !meta.is_dir() {
                return Ok(());
            } else if self.made.insert(at.clone()) {
                self.ops.push(Op::Mkdir(under("/newroot", &at)?));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binds(world: &World) -> Vec<String> {
        world
            .ops
            .iter()
            .filter_map(|op| match op {
                Op::Bind { to, .. } => Some(to.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_deep_tree_gets_stub_parents_and_nothing_beside_it() {
        let home = tempfile::tempdir().unwrap();
        let tree = home.path().join("a/b/tree");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::create_dir_all(home.path().join("a/secret")).unwrap();
        let mut world = World::default();
        world.show_all([tree.as_path()]).unwrap();
        let to = format!("/newroot{}", tree.display());
        assert_eq!(binds(&world), [to]);
        let made: Vec<_> = world.made.iter().collect();
        assert!(made.iter().any(|m| m.ends_with("a/b")), "{made:?}");
        assert!(!made.iter().any(|m| m.ends_with("secret")), "{made:?}");
    }

    #[test]
    fn a_link_on_the_way_is_copied_and_its_target_shown() {
        let root = tempfile::tempdir().unwrap();
        let real = root.path().join("real/lib");
        std::fs::create_dir_all(&real).unwrap();
        std::os::unix::fs::symlink("real", root.path().join("alias")).unwrap();
        let mut world = World::default();
        world
            .show_all([root.path().join("alias/lib").as_path()])
            .unwrap();
        let real = std::fs::canonicalize(&real).unwrap();
        assert_eq!(binds(&world), [format!("/newroot{}", real.display())]);
        assert!(world
            .ops
            .iter()
            .any(|op| matches!(op, Op::Symlink { target, .. }
            if target.to_bytes() == b"real")));
    }

    #[test]
    fn a_tree_covers_what_lies_in_it_and_missing_paths_are_skipped() {
        let mut world = World::default();
        world
            .show_all([
                Path::new("/usr/lib"),
                Path::new("/usr"),
                Path::new("/no/such/path"),
            ])
            .unwrap();
        assert_eq!(binds(&world), ["/newroot/usr"]);
        assert!(world.covers(Path::new("/usr/lib/python3")));
        assert!(!world.covers(Path::new("/etc")));
        // A mount point cannot be made inside a shown tree (that would write on the host).
        assert!(world.stub_dir(Path::new("/usr/new")).is_err());
    }
}
