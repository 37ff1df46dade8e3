//! What a warm interpreter imports before its run: the stdlib modules runs import most, the
//! operator's `--preload`, and what earlier runs of the same environment and caller imported
//! (their driver's report, read back by the server). Pure: names in, names out.
//!
//! A report is the run's own file, so it is untrusted: only dotted identifiers are kept, a
//! bounded number of them, and the driver imports a name only when it resolves to the
//! interpreter's standard library or its site-packages (never a project source).

use std::collections::BTreeSet;

/// The standard library modules scripts import most, kept to the cheap ones (13 ms of CPU per
/// spare on this machine; the 40 most common cost 43 ms, paid by every spare whether its run
/// uses them or not): what a folder's runs really import is learned after its first run.
pub(crate) const DEFAULT_PRELOAD: &[&str] = &[
    "collections",
    "datetime",
    "functools",
    "itertools",
    "json",
    "math",
    "pathlib",
    "random",
    "re",
    "typing",
];

/// Names kept per environment and caller at most.
const MAX_NAMES: usize = 2048;
/// The longest report read, in bytes.
pub(crate) const MAX_REPORT: u64 = 256 * 1024;
/// The longest preload argument passed to the driver (one argv string: Linux takes 128 KiB).
const MAX_ARG: usize = 120 * 1024;

/// Whether `name` is a module name the driver may be asked to import: dotted identifiers, none
/// of them `__main__` (importing `venv.__main__` or `pip.__main__` runs that program).
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 200
        && name.split('.').all(|part| {
            let mut chars = part.chars();
            part != "__main__"
                && chars
                    .next()
                    .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
                && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
        })
}

/// What the runs of one environment and caller imported, and the names whose import was undone.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Learned {
    names: BTreeSet<String>,
    noisy: BTreeSet<String>,
}

impl Learned {
    /// Adds a report: one name per line, `!name` for a name whose import printed or changed the
    /// process (never preloaded again). Invalid lines are skipped.
    pub(crate) fn add_report(&mut self, report: &[u8]) {
        let text = String::from_utf8_lossy(report);
        for line in text.lines() {
            let (noisy, name) = match line.strip_prefix('!') {
                Some(name) => (true, name),
                None => (false, line),
            };
            if !valid_name(name) {
                continue;
            }
            if noisy {
                if self.noisy.len() < MAX_NAMES {
                    self.noisy.insert(name.to_owned());
                }
                self.names.remove(name);
            } else if self.names.len() < MAX_NAMES && !self.noisy.contains(name) {
                self.names.insert(name.to_owned());
            }
        }
    }

    /// Forgets the learned names (a spare that imported them did not get ready).
    pub(crate) fn forget_names(&mut self) {
        self.names.clear();
    }

    /// The driver's argument: the defaults, the operator's names, then the learned ones, without
    /// noisy ones or repeats, comma-separated, within the argument's limit.
    pub(crate) fn preload_arg(&self, operator: &[String]) -> String {
        let mut seen = BTreeSet::new();
        let mut arg = String::new();
        let names = DEFAULT_PRELOAD
            .iter()
            .copied()
            .chain(operator.iter().map(String::as_str))
            .chain(self.names.iter().map(String::as_str));
        for name in names {
            if !valid_name(name) || self.noisy.contains(name) || !seen.insert(name) {
                continue;
            }
            if arg.len() + name.len() + 1 > MAX_ARG {
                break;
            }
            if !arg.is_empty() {
                arg.push(',');
            }
            arg.push_str(name);
        }
        arg
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_dotted_identifiers_are_names() {
        for good in ["numpy", "pandas.core.frame", "_ssl", "a1.b_2"] {
            assert!(valid_name(good), "{good}");
        }
        for bad in [
            "",
            "1abc",
            "a..b",
            "a.",
            ".a",
            "os; rm",
            "a/b",
            "é",
            "a-b",
            "venv.__main__",
            "__main__",
            &"x".repeat(201),
        ] {
            assert!(!valid_name(bad), "{bad}");
        }
    }

    #[test]
    fn a_report_adds_names_and_noisy_names_never_come_back() {
        let mut learned = Learned::default();
        learned.add_report(b"numpy\npandas\n../../etc\n!chatty\nchatty\nos;x\n");
        let arg = learned.preload_arg(&[]);
        let names: Vec<&str> = arg.split(',').collect();
        assert!(
            names.contains(&"numpy") && names.contains(&"pandas"),
            "{arg}"
        );
        assert!(!names.contains(&"chatty"), "{arg}");
        assert!(!arg.contains("etc") && !arg.contains(';'), "{arg}");
        // The defaults come first, once each.
        assert_eq!(names[0], DEFAULT_PRELOAD[0]);
        assert_eq!(names.iter().filter(|n| **n == "json").count(), 1);
        learned.add_report(b"!numpy\n");
        assert!(!learned.preload_arg(&[]).split(',').any(|n| n == "numpy"));
    }

    #[test]
    fn the_operators_names_are_checked_and_the_argument_stays_bounded() {
        let mut learned = Learned::default();
        let many: String = (0..20_000).map(|i| format!("module_{i}\n")).collect();
        learned.add_report(many.as_bytes());
        assert_eq!(learned.names.len(), MAX_NAMES);
        let arg = learned.preload_arg(&["torch".into(), "bad name".into()]);
        assert!(arg.len() <= MAX_ARG, "{}", arg.len());
        assert!(arg.split(',').any(|n| n == "torch"));
        assert!(!arg.contains("bad name"));
    }
}
