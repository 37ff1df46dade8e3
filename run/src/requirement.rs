//! What `install_packages` may ask an installer for: a PEP 508 name with optional extras and
//! version specifiers, and nothing else. Pure: no I/O, no process.
//!
//! Accepted: `name`, `name[extra1,extra2]`, `name >=1.0, <2`, `name[extra] (==1.2.*)`, `name~=1.4`,
//! `name==1.0+local.3`. Everything else is refused before any process starts, with the reason:
//! options (anything starting with `-`: `-e`, `-r`, `--index-url`...), URLs (`pkg @ https://…`,
//! `git+…`), paths (`./pkg`, `/tmp/x.whl`, `~/x`, `C:\x`), environment markers (`; python_version
//! < "3.9"`: the install is for the server's own interpreter, so a marker would only be a place to
//! hide text), shell syntax (`|`, `&`, `$(`, backticks, `>`...), control characters (newlines, NUL,
//! tabs), over-long names and strings.
//!
//! A checked [`Requirement`] is rendered anew from its parsed parts ([`Requirement::to_arg`]):
//! the installer's argv never holds a byte of the caller's text that the grammar did not read.
//! A requirements file is read by the same checker line by line ([`parse_requirements_file`]):
//! blank lines and `#` comments pass; any other line must be a requirement, or the whole file is
//! refused with that line's number (so `--index-url` or `-r other.txt` in a file never reach an
//! installer; the file itself is never given to one).

use std::fmt::Write as _;

/// The longest requirement accepted, in bytes.
pub const MAX_REQUIREMENT_BYTES: usize = 200;
/// The longest package name (PyPI's own limit is lower in practice).
pub const MAX_NAME_BYTES: usize = 100;
/// The most requirements one install takes (arguments and file together).
pub const MAX_REQUIREMENTS: usize = 100;
/// The largest requirements file read, in bytes.
pub const MAX_REQUIREMENTS_FILE_BYTES: u64 = 64 << 10;

/// A checked requirement: a name, extras and version specifiers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    name: String,
    extras: Vec<String>,
    specifiers: Vec<Specifier>,
}

/// One version clause, e.g. `>=` `1.0`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Specifier {
    op: &'static str,
    version: String,
}

/// Why a requirement was refused. The text quotes nothing: the serve layer quotes the caller's
/// own string beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", self.describe())]
pub enum RequirementError {
    Empty,
    TooLong,
    ControlCharacter,
    Option,
    Url,
    Path,
    Marker,
    Forbidden,
    BadName,
    NameTooLong,
    BadExtras,
    BadSpecifier,
}

impl RequirementError {
    /// What is wrong, in fixed words that follow the quoted requirement.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Empty => "is empty",
            Self::TooLong => "is longer than the 200 bytes accepted",
            Self::ControlCharacter => "holds a control character (a newline, tab or NUL byte)",
            Self::Option => "is an installer option: only package names with versions are accepted",
            Self::Url => "is a URL: packages come only from the server's package index",
            Self::Path => "is a path: packages come only from the server's package index",
            Self::Marker => "has an environment marker (`;`): markers are not accepted",
            Self::Forbidden => "holds shell syntax or a character no requirement has",
            Self::BadName => "does not start with a valid package name",
            Self::NameTooLong => "has a package name longer than the 100 bytes accepted",
            Self::BadExtras => "has malformed extras (expected `name[extra1,extra2]`)",
            Self::BadSpecifier => "has a malformed version specifier (expected e.g. `>=1.0, <2`)",
        }
    }
}

impl Requirement {
    /// The name as the caller wrote it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The one argv item an installer gets for it: `name[a,b]>=1.0,<2`.
    pub fn to_arg(&self) -> String {
        let mut arg = self.name.clone();
        if !self.extras.is_empty() {
            let _ = write!(arg, "[{}]", self.extras.join(","));
        }
        let specs: Vec<String> = self
            .specifiers
            .iter()
            .map(|s| format!("{}{}", s.op, s.version))
            .collect();
        arg.push_str(&specs.join(","));
        arg
    }
}

/// Version operators, longest first (so `===` is not read as `==` then `=`).
const OPERATORS: &[&str] = &["===", "~=", "==", "!=", "<=", ">=", "<", ">"];

/// Checks one requirement string.
pub fn parse_requirement(text: &str) -> Result<Requirement, RequirementError> {
    precheck(text)?;
    let mut rest = text.trim_matches(' ');
    let name_len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
    let name = &rest[..name_len];
    if !is_valid_name(name) {
        return Err(RequirementError::BadName);
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(RequirementError::NameTooLong);
    }
    rest = rest[name_len..].trim_start_matches(' ');
    let mut extras = Vec::new();
    if let Some(after) = rest.strip_prefix('[') {
        let close = after.find(']').ok_or(RequirementError::BadExtras)?;
        for extra in after[..close].split(',') {
            let extra = extra.trim_matches(' ');
            if !is_valid_name(extra) || extra.len() > MAX_NAME_BYTES {
                return Err(RequirementError::BadExtras);
            }
            extras.push(extra.to_owned());
        }
        rest = after[close + 1..].trim_start_matches(' ');
    }
    // PEP 508 allows the specifiers in parentheses.
    if let Some(inner) = rest.strip_prefix('(') {
        rest = inner
            .strip_suffix(')')
            .ok_or(RequirementError::BadSpecifier)?;
    }
    let specifiers = parse_specifiers(rest)?;
    Ok(Requirement {
        name: name.to_owned(),
        extras,
        specifiers,
    })
}

/// The refusals that name what the text is (an option, a URL, a path, a marker, shell syntax)
/// before the grammar says only "malformed".
fn precheck(text: &str) -> Result<(), RequirementError> {
    if text.len() > MAX_REQUIREMENT_BYTES {
        return Err(RequirementError::TooLong);
    }
    if text.chars().any(char::is_control) {
        return Err(RequirementError::ControlCharacter);
    }
    let trimmed = text.trim_matches(' ');
    if trimmed.is_empty() {
        return Err(RequirementError::Empty);
    }
    if trimmed.starts_with('-') {
        return Err(RequirementError::Option);
    }
    if trimmed.contains("://") || trimmed.contains('@') || trimmed.starts_with("git+") {
        return Err(RequirementError::Url);
    }
    let is_drive = trimmed.len() > 1 && trimmed.as_bytes()[1] == b':';
    if trimmed.contains(['/', '\\'])
        || trimmed.starts_with(['.', '~'])
        || is_drive
        || trimmed.ends_with(".whl")
        || trimmed.ends_with(".tar.gz")
        || trimmed.ends_with(".zip")
    {
        return Err(RequirementError::Path);
    }
    if trimmed.contains(';') {
        return Err(RequirementError::Marker);
    }
    if !trimmed.chars().all(is_allowed_char) {
        return Err(RequirementError::Forbidden);
    }
    Ok(())
}

/// Every character a requirement of this grammar may hold.
fn is_allowed_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || " ._-[],()<>=!~*+".contains(c)
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')
}

/// PEP 508: letters and digits at both ends, `.`, `_`, `-` between.
fn is_valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && name.chars().all(is_name_char)
        }
        _ => false,
    }
}

/// `>=1.0, <2` (possibly empty).
fn parse_specifiers(text: &str) -> Result<Vec<Specifier>, RequirementError> {
    let text = text.trim_matches(' ');
    if text.is_empty() {
        return Ok(Vec::new());
    }
    text.split(',').map(parse_specifier).collect()
}

fn parse_specifier(clause: &str) -> Result<Specifier, RequirementError> {
    let clause = clause.trim_matches(' ');
    let op = OPERATORS
        .iter()
        .find(|op| clause.starts_with(**op))
        .ok_or(RequirementError::BadSpecifier)?;
    let version = clause[op.len()..].trim_start_matches(' ');
    if !is_valid_version(version, op) {
        return Err(RequirementError::BadSpecifier);
    }
    Ok(Specifier {
        op,
        version: version.to_owned(),
    })
}

/// A PEP 440 version as a specifier may hold it: `[N!]N(.N)*` with pre/post/dev parts in
/// letters and digits, `.*` only after `==`/`!=`, a local label `+abc.1` only after `==`, `!=`
/// or `===`. Letters, digits, `.`, `!`, `+`, `*`, `_`, `-` only: nothing a path or URL needs.
fn is_valid_version(version: &str, op: &str) -> bool {
    if version.is_empty() || version.len() > 64 {
        return false;
    }
    let starts_well = version
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric());
    if !starts_well {
        return false;
    }
    let (public, local) = match version.split_once('+') {
        Some((public, local)) => (public, Some(local)),
        None => (version, None),
    };
    let wildcard = public.ends_with(".*");
    let public = public.strip_suffix(".*").unwrap_or(public);
    if wildcard && !matches!(op, "==" | "!=") {
        return false;
    }
    let public_ok = !public.is_empty()
        && public
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '!' | '_' | '-'))
        && public.chars().any(|c| c.is_ascii_digit());
    let local_ok = match local {
        None => true,
        Some(local) => {
            !wildcard
                && matches!(op, "==" | "!=" | "===")
                && !local.is_empty()
                && local
                    .split(['.', '_', '-'])
                    .all(|part| !part.is_empty() && part.chars().all(|c| c.is_ascii_alphanumeric()))
        }
    };
    public_ok && local_ok
}

/// A refused line of a requirements file: its number (from 1) and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("line {line} {reason}")]
pub struct FileLineError {
    pub line: usize,
    pub reason: RequirementError,
}

/// Reads a requirements file: blank lines and `#` comments (a whole line, or after a space)
/// pass; every other line must pass [`parse_requirement`], or the first that does not is
/// returned. Line continuations (`\`), options (`-r`, `--index-url`) and everything else pip
/// would read from such a file are refused like any other line.
pub fn parse_requirements_file(text: &str) -> Result<Vec<Requirement>, FileLineError> {
    let mut found = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = strip_comment(raw.strip_suffix('\r').unwrap_or(raw));
        // Only spaces make a blank line: a tab (a control character) is refused like elsewhere.
        if line.chars().all(|c| c == ' ') {
            continue;
        }
        let requirement = parse_requirement(line).map_err(|reason| FileLineError {
            line: index + 1,
            reason,
        })?;
        found.push(requirement);
    }
    Ok(found)
}

/// pip's comment rule: `#` at the start of a line or after whitespace starts a comment.
fn strip_comment(line: &str) -> &str {
    if line.starts_with('#') {
        return "";
    }
    match line.find(" #") {
        Some(at) => &line[..at],
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> String {
        parse_requirement(text)
            .unwrap_or_else(|e| panic!("{text:?} refused: {e}"))
            .to_arg()
    }

    fn refused(text: &str) -> RequirementError {
        match parse_requirement(text) {
            Ok(r) => panic!("{text:?} accepted as {:?}", r.to_arg()),
            Err(e) => e,
        }
    }

    #[test]
    fn names_extras_and_specifiers_are_accepted_and_rendered_anew() {
        assert_eq!(ok("requests"), "requests");
        assert_eq!(ok("  Flask_SQLAlchemy.x-2  "), "Flask_SQLAlchemy.x-2");
        assert_eq!(ok("a"), "a");
        assert_eq!(ok("requests[socks, security]"), "requests[socks,security]");
        assert_eq!(ok("numpy >=1.20, <2"), "numpy>=1.20,<2");
        assert_eq!(ok("numpy>=1.20,<2.0"), "numpy>=1.20,<2.0");
        assert_eq!(ok("pkg[x] (==1.2.*)"), "pkg[x]==1.2.*");
        assert_eq!(ok("pkg~=1.4.2"), "pkg~=1.4.2");
        assert_eq!(ok("pkg!=1.5"), "pkg!=1.5");
        assert_eq!(ok("pkg===1.0"), "pkg===1.0");
        assert_eq!(ok("pkg==1!2.0.post1.dev3"), "pkg==1!2.0.post1.dev3");
        assert_eq!(ok("pkg==1.0rc1"), "pkg==1.0rc1");
        assert_eq!(ok("pkg==1.0+ubuntu.1"), "pkg==1.0+ubuntu.1");
        assert_eq!(ok("pkg > 1"), "pkg>1");
    }

    #[test]
    fn options_are_refused() {
        for text in [
            "-e .",
            "-e git+https://x/y",
            "--index-url=https://evil.example/simple",
            "--index-url https://evil.example/simple",
            "--extra-index-url https://evil.example",
            "-r other.txt",
            "-c constraints.txt",
            "--pre",
            "-i https://x",
            "--trusted-host evil",
            " -U pip",
            "--",
        ] {
            let e = refused(text);
            assert!(
                matches!(
                    e,
                    RequirementError::Option | RequirementError::Url | RequirementError::Path
                ),
                "{text:?}: {e:?}"
            );
        }
        assert_eq!(refused("--pre"), RequirementError::Option);
        assert_eq!(refused("-r other.txt"), RequirementError::Option);
    }

    #[test]
    fn urls_and_paths_are_refused() {
        for text in [
            "pkg @ https://evil.example/pkg-1.0-py3-none-any.whl",
            "pkg@file:///etc/passwd",
            "https://evil.example/pkg.whl",
            "git+https://github.com/x/y",
            "file:///tmp/x.whl",
            "pkg @ git+ssh://git@host/x",
        ] {
            assert_eq!(refused(text), RequirementError::Url, "{text:?}");
        }
        for text in [
            "./pkg",
            ".",
            "..",
            "/tmp/pkg-1.0-py3-none-any.whl",
            "~/pkg",
            "C:\\pkg",
            "c:pkg",
            "pkg/sub",
            "dist\\pkg.whl",
            "pkg-1.0-py3-none-any.whl",
            "pkg-1.0.tar.gz",
            "pkg.zip",
            "pkg==1.0+../../x",
        ] {
            assert_eq!(refused(text), RequirementError::Path, "{text:?}");
        }
    }

    #[test]
    fn markers_shell_syntax_and_control_characters_are_refused() {
        assert_eq!(
            refused("pkg; python_version < \"3.9\""),
            RequirementError::Marker
        );
        assert_eq!(refused("pkg ; rm -rf x"), RequirementError::Marker);
        assert_eq!(refused("pkg;id"), RequirementError::Marker);
        for text in [
            "pkg | sh",
            "pkg && id",
            "pkg `id`",
            "pkg $(id)",
            "pkg > out",
            "pkg < in",
            "pkg'",
            "pkg\"",
            "pkg{a}",
            "pkg==1.0 # comment",
            "pkg?x=1",
            "pkg%20",
            "pkgé",
        ] {
            let e = refused(text);
            assert!(
                matches!(
                    e,
                    RequirementError::Forbidden
                        | RequirementError::BadSpecifier
                        | RequirementError::BadName
                ),
                "{text:?}: {e:?}"
            );
        }
        for text in ["pkg\nother", "pkg\0", "pkg\t==1", "pkg\r", "\u{1b}[31mpkg"] {
            assert_eq!(
                refused(text),
                RequirementError::ControlCharacter,
                "{text:?}"
            );
        }
    }

    #[test]
    fn malformed_names_extras_specifiers_and_sizes_are_refused() {
        assert_eq!(refused(""), RequirementError::Empty);
        assert_eq!(refused("   "), RequirementError::Empty);
        assert_eq!(refused("_pkg"), RequirementError::BadName);
        assert_eq!(refused("pkg-"), RequirementError::BadName);
        assert_eq!(refused("==1.0"), RequirementError::BadName);
        assert_eq!(refused("pkg[a"), RequirementError::BadExtras);
        assert_eq!(refused("pkg[a,]"), RequirementError::BadExtras);
        assert_eq!(refused("pkg[-a]"), RequirementError::BadExtras);
        assert_eq!(refused("pkg 1.0"), RequirementError::BadSpecifier);
        assert_eq!(refused("pkg=1.0"), RequirementError::BadSpecifier);
        assert_eq!(refused("pkg>=1.*"), RequirementError::BadSpecifier);
        assert_eq!(refused("pkg>=1.0+local"), RequirementError::BadSpecifier);
        assert_eq!(refused("pkg==1.0,"), RequirementError::BadSpecifier);
        assert_eq!(refused("pkg==*"), RequirementError::BadSpecifier);
        assert_eq!(refused("pkg==.1"), RequirementError::BadSpecifier);
        assert_eq!(refused("pkg (==1.0"), RequirementError::BadSpecifier);
        assert_eq!(refused("pkg other"), RequirementError::BadSpecifier);
        assert_eq!(refused("pkg==1.0+"), RequirementError::BadSpecifier);
        assert_eq!(refused(&"a".repeat(101)), RequirementError::NameTooLong);
        assert_eq!(refused(&"a".repeat(201)), RequirementError::TooLong);
        assert_eq!(
            refused(&format!("a=={}", "1".repeat(65))),
            RequirementError::BadSpecifier
        );
    }

    #[test]
    fn the_refusals_name_the_limits_they_enforce() {
        let too_long = RequirementError::TooLong.describe();
        assert!(
            too_long.contains(&MAX_REQUIREMENT_BYTES.to_string()),
            "{too_long}"
        );
        let name = RequirementError::NameTooLong.describe();
        assert!(name.contains(&MAX_NAME_BYTES.to_string()), "{name}");
    }

    #[test]
    fn a_requirements_file_passes_comments_and_names_the_first_bad_line() {
        let file = "# tools\n\nrequests>=2 # http\nnumpy[extra]==1.2.*\r\n   \n";
        let found = parse_requirements_file(file).unwrap();
        let args: Vec<_> = found.iter().map(Requirement::to_arg).collect();
        assert_eq!(args, ["requests>=2", "numpy[extra]==1.2.*"]);

        let smuggled = "requests\n# fine\n--index-url https://evil.example/simple\nnumpy\n";
        assert_eq!(
            parse_requirements_file(smuggled),
            Err(FileLineError {
                line: 3,
                reason: RequirementError::Option
            })
        );
        for (text, reason) in [
            ("-r other.txt\n", RequirementError::Option),
            ("pkg @ https://x/y.whl\n", RequirementError::Url),
            ("./local\n", RequirementError::Path),
            ("pkg \\\n  >=1\n", RequirementError::Path),
            ("pkg; os_name == 'nt'\n", RequirementError::Marker),
            ("\t\n", RequirementError::ControlCharacter),
            ("pkg#frag\n", RequirementError::Forbidden),
        ] {
            let e = parse_requirements_file(text).unwrap_err();
            assert_eq!((e.line, e.reason), (1, reason), "{text:?}");
        }
        assert_eq!(parse_requirements_file("").unwrap(), Vec::new());
        assert_eq!(
            parse_requirements_file("a\nb\n  # c\n\u{0}\n")
                .unwrap_err()
                .line,
            4
        );
    }
}
