//! Whether this binary runs beside the source tree it was built from (a clone), so that a hint
//! may name the clone's `scripts/`; a release download ships the binaries, README, SECURITY.md
//! and docs/ only, and its hints say what to do without them.

use std::path::Path;

/// True when the `scripts/` folder of the workspace this binary was built in is still there.
pub fn beside_its_clone() -> bool {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../scripts/bundle.sh")
        .is_file()
}

/// `from_clone` when running beside the clone, `from_release` otherwise.
pub fn pick(from_clone: &'static str, from_release: &'static str) -> &'static str {
    if beside_its_clone() {
        from_clone
    } else {
        from_release
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_tests_run_in_the_clone() {
        assert!(super::beside_its_clone());
        assert_eq!(super::pick("clone", "release"), "clone");
    }
}
