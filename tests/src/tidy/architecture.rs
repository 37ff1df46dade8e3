//! ARCHITECTURE.md against the repository: every path it names in backticks exists, and every
//! Rust name it names in backticks (`Type`, `Type::method`, `module::function`, `CONSTANT`) is
//! one the code defines — or, for a name of another crate, one the code uses; and a name it places
//! in a file ("`X` of `path`", a code map entry's lead "`path` — `X`") is defined there.

use std::collections::BTreeSet;

use super::rust_source::CodeIndex;

/// One inline code span of a Markdown text and the line it starts on.
#[derive(Debug, PartialEq, Eq)]
pub struct Span {
    pub line: usize,
    pub text: String,
    /// The prose between the previous span and this one, spaces collapsed.
    pub after_previous: String,
}

/// The inline code spans of a Markdown text, outside fenced code blocks. A span may run over a
/// line break (read as a space).
pub fn code_spans(markdown: &str) -> Vec<Span> {
    let mut prose = String::new();
    let mut in_fence = false;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            prose.push('\n');
            continue;
        }
        if !in_fence {
            prose.push_str(line);
        }
        prose.push('\n');
    }
    let chars: Vec<char> = prose.chars().collect();
    let mut spans = Vec::new();
    let (mut i, mut line, mut previous_end) = (0, 1, 0);
    while i < chars.len() {
        if chars[i] == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if chars[i] != '`' {
            i += 1;
            continue;
        }
        // A run of n backticks opens a span that the next run of exactly n closes.
        let run = chars[i..].iter().take_while(|&&c| c == '`').count();
        let body_start = i + run;
        let mut j = body_start;
        let mut close = None;
        while j < chars.len() {
            if chars[j] == '`' {
                let n = chars[j..].iter().take_while(|&&c| c == '`').count();
                if n == run {
                    close = Some(j);
                    break;
                }
                j += n;
            } else {
                j += 1;
            }
        }
        match close {
            Some(end) => {
                let body: String = chars[body_start..end].iter().collect();
                let lines_inside = body.matches('\n').count();
                let between: String = chars[previous_end..i].iter().collect();
                previous_end = end + run;
                spans.push(Span {
                    line,
                    after_previous: between.split_whitespace().collect::<Vec<_>>().join(" "),
                    text: body
                        .replace('\n', " ")
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                });
                line += lines_inside;
                i = end + run;
            }
            None => i = body_start,
        }
    }
    spans
}

/// What a repository looks like to the path check: its top-level entries, and every file and
/// folder in it (relative, `/`-separated).
pub struct RepoTree {
    pub top_level: BTreeSet<String>,
    pub files: BTreeSet<String>,
    pub dirs: BTreeSet<String>,
}

/// File endings a relative path (one not starting at the repository's top) is checked for: the
/// repository's own kinds of file, not files that only exist at run time.
const CHECKED_RELATIVE: [&str; 2] = [".rs", ".sh"];

/// Every repository path the document names that does not exist, as messages. A path starting at
/// a top-level entry (`server/src/…`, `.github/…`) must exist as written; a relative one
/// (`transport/http.rs`, or a bare `runner.rs`) must be the end of some file's path.
pub fn missing_paths(doc_name: &str, spans: &[Span], repo: &RepoTree) -> (usize, Vec<String>) {
    let mut named = 0;
    let mut problems = Vec::new();
    for span in spans {
        let path = span.text.as_str();
        match repo_path(path, repo) {
            Some(RepoPath::Rooted) => {
                named += 1;
                let trimmed = path.trim_end_matches('/');
                let exists = if path.ends_with('/') {
                    repo.dirs.contains(trimmed)
                } else {
                    repo.files.contains(trimmed) || repo.dirs.contains(trimmed)
                };
                if !exists {
                    problems.push(format!(
                        "{doc_name}:{}: names `{path}`, which does not exist",
                        span.line
                    ));
                }
            }
            Some(RepoPath::Relative) => {
                named += 1;
                if !repo.files.iter().any(|f| same_file(f, path)) {
                    problems.push(format!(
                        "{doc_name}:{}: names `{path}`, but no file of the repository is (or ends in) that path",
                        span.line
                    ));
                }
            }
            None => {}
        }
    }
    (named, problems)
}

/// How a span names a repository path, if it does.
#[derive(Debug, PartialEq, Eq)]
enum RepoPath {
    /// From a top-level entry: `server/src/app/`, `.github/workflows/ci.yml`.
    Rooted,
    /// The end of a path: `transport/http.rs`, `runner.rs`.
    Relative,
}

fn repo_path(path: &str, repo: &RepoTree) -> Option<RepoPath> {
    let not_a_path = path.contains(char::is_whitespace)
        || path.contains("://")
        || path.starts_with('/')
        || path.contains('*')
        || path.contains('{');
    let first = path.split('/').next().unwrap_or_default();
    if not_a_path {
        None
    } else if path.contains('/') && repo.top_level.contains(first) {
        Some(RepoPath::Rooted)
    } else if CHECKED_RELATIVE.iter().any(|ext| path.ends_with(ext))
        && path
            .chars()
            .all(|c| c.is_alphanumeric() || "_-./".contains(c))
    {
        Some(RepoPath::Relative)
    } else {
        None
    }
}

/// Whether a file of the repository is the one a (relative or rooted) path names.
fn same_file(file: &str, path: &str) -> bool {
    file == path || file.ends_with(&format!("/{path}"))
}

/// Every name the document places in a file or folder that does not define it, as messages:
/// "`PROTECTED_NAMES` of `sandbox/src/policy.rs`", "`run_alone` in `server/tests/util/mod.rs`",
/// and a code map entry's lead, "`run/src/caller.rs` — `Caller`: …".
pub fn misplaced_names(
    doc_name: &str,
    spans: &[Span],
    code: &CodeIndex,
    repo: &RepoTree,
) -> Vec<String> {
    let mut problems = Vec::new();
    for pair in spans.windows(2) {
        let (first, second) = (&pair[0], &pair[1]);
        let (name, place) = match second.after_previous.as_str() {
            "of" | "in" => (first, second),
            "—" => (second, first),
            _ => continue,
        };
        if classify(&name.text).is_none() {
            continue;
        }
        let Some(kind) = repo_path(&place.text, repo) else {
            continue;
        };
        let last = name
            .text
            .trim_end_matches("()")
            .rsplit("::")
            .next()
            .unwrap_or_default();
        // A name the code does not define at all is the existence check's to report.
        let Some(files) = code.defined_in.get(last) else {
            continue;
        };
        let folder = place.text.trim_end_matches('/');
        let inside = |f: &&String| match kind {
            RepoPath::Rooted => f.as_str() == folder || f.starts_with(&format!("{folder}/")),
            RepoPath::Relative => same_file(f, folder),
        };
        if !files.iter().any(|f| inside(&f)) {
            let defined: Vec<&str> = files.iter().map(String::as_str).collect();
            problems.push(format!(
                "{doc_name}:{}: places `{}` in `{}`, but it is defined in {}",
                name.line,
                name.text,
                place.text,
                defined.join(", ")
            ));
        }
    }
    problems
}

/// The kind of Rust name a span is, if it is one.
#[derive(Debug, PartialEq, Eq)]
enum RustName<'a> {
    /// `a::b::c` (a trailing `()` dropped).
    Path(Vec<&'a str>),
    /// `Sandbox`, `RunStatus`.
    Type(&'a str),
    /// `PROTECTED_NAMES`, `RUNPOD_API_KEY`.
    Constant(&'a str),
    /// `router()`: a fn.
    Call(&'a str),
    /// `run_call`, `keep_ended`: a module, fn or field. Only names with an underscore are
    /// checked: one plain word (`run`, `reply`) is everywhere in the code and proves nothing.
    Snake(&'a str),
}

fn is_ident(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c == '_' || c.is_ascii_alphabetic())
        && chars.all(|c| c == '_' || c.is_ascii_alphanumeric())
}

fn classify(text: &str) -> Option<RustName<'_>> {
    let called = text.strip_suffix("()");
    let bare = called.unwrap_or(text);
    if bare.contains("::") {
        let segments: Vec<&str> = bare.split("::").collect();
        return segments
            .iter()
            .all(|s| is_ident(s))
            .then_some(RustName::Path(segments));
    }
    if !is_ident(bare) {
        return None;
    }
    let first = bare.chars().next()?;
    if called.is_some() {
        return Some(RustName::Call(bare));
    }
    if first.is_ascii_uppercase()
        && bare.chars().any(|c| c.is_ascii_lowercase())
        && !bare.contains('_')
    {
        return Some(RustName::Type(bare));
    }
    if bare.len() > 1
        && bare
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        && bare.contains('_')
    {
        return Some(RustName::Constant(bare));
    }
    let snake = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_';
    if first.is_ascii_lowercase() && bare.contains('_') && bare.chars().all(snake) {
        return Some(RustName::Snake(bare));
    }
    None
}

/// Every Rust name the document names that the code does not have, as messages. `A::b` holds
/// when `A` is a crate or module of the workspace with an item `b`, or a type of it with a member
/// `b` (a fn or constant of one of its `impl` blocks, a trait's item, an enum's variant), and so
/// on down the path; a path that starts at another crate (`std::process::Command`, a name
/// imported from one such as `AsyncFd`) holds when the code uses each of its later names. A bare
/// `Type`, `CONSTANT` or `snake_name` holds when the code defines or uses it; `f()` when some fn
/// is called `f`.
pub fn unknown_names(
    doc_name: &str,
    spans: &[Span],
    code: &CodeIndex,
    external_crates: &BTreeSet<String>,
) -> (usize, Vec<String>) {
    let mut named = 0;
    let mut problems = Vec::new();
    for span in spans {
        let Some(name) = classify(&span.text) else {
            continue;
        };
        named += 1;
        let problem = match name {
            RustName::Path(segments) => path_problem(&segments, code, external_crates),
            RustName::Type(t) => (!code.types.contains(t) && !code.words.contains(t))
                .then(|| format!("the code neither defines nor uses `{t}`")),
            RustName::Constant(c) => (!code.words.contains(c))
                .then(|| format!("the code neither defines nor uses `{c}`")),
            RustName::Call(f) => {
                (!code.fns.contains(f)).then(|| format!("no fn of the code is called `{f}`"))
            }
            RustName::Snake(w) => (!code.words.contains(w)).then(|| {
                format!(
                    "the code never uses `{w}` (gone or renamed? if it is no Rust name, write it \
                     without backticks)"
                )
            }),
        };
        if let Some(problem) = problem {
            problems.push(format!(
                "{doc_name}:{}: names `{}`, but {problem}",
                span.line, span.text
            ));
        }
    }
    (named, problems)
}

/// Where a path's walk may stand after some of its segments.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Place {
    Module(String),
    Type(String),
    /// In another crate, or past a member: later names need only be used by the code.
    Elsewhere,
}

/// Why a path the document names is not one the code has, or `None` when it is.
fn path_problem(
    segments: &[&str],
    code: &CodeIndex,
    external_crates: &BTreeSet<String>,
) -> Option<String> {
    let first = segments[0];
    let mut places = places_named(first, code);
    let defined_here = !places.is_empty();
    if external_crates.contains(first) || (!defined_here && code.words.contains(first)) {
        places.insert(Place::Elsewhere);
    }
    if places.is_empty() {
        return Some(format!(
            "`{first}` is no crate, module or type of the workspace, nor a name its code uses"
        ));
    }
    for segment in segments.iter().skip(1) {
        let mut next = BTreeSet::new();
        for place in &places {
            match place {
                Place::Module(m)
                    if code
                        .modules
                        .get(m)
                        .is_some_and(|items| items.contains(*segment)) =>
                {
                    let named = places_named(segment, code);
                    if named.is_empty() {
                        // An item that is neither a module nor a type (a fn, a constant) ends
                        // the walk.
                        next.insert(Place::Elsewhere);
                    }
                    next.extend(named);
                }
                Place::Type(t) if code.members.get(t).is_some_and(|m| m.contains(*segment)) => {
                    next.insert(Place::Elsewhere);
                }
                Place::Elsewhere if code.words.contains(*segment) => {
                    next.insert(Place::Elsewhere);
                }
                _ => {}
            }
        }
        if next.is_empty() {
            let reasons: Vec<String> = places
                .iter()
                .map(|place| match place {
                    Place::Module(m) => format!("module `{m}` has no item `{segment}`"),
                    Place::Type(t) => {
                        format!("type `{t}` has no fn, constant or variant `{segment}`")
                    }
                    Place::Elsewhere => format!("the code never uses `{segment}`"),
                })
                .collect();
            return Some(reasons.join(", and "));
        }
        places = next;
    }
    None
}

/// The modules (crates included) and types the code defines under a name.
fn places_named(name: &str, code: &CodeIndex) -> BTreeSet<Place> {
    let mut places = BTreeSet::new();
    if code.modules.contains_key(name) {
        places.insert(Place::Module(name.to_owned()));
    }
    if code.types.contains(name) || code.members.contains_key(name) {
        places.insert(Place::Type(name.to_owned()));
    }
    places
}

#[cfg(test)]
mod tests {
    use super::super::rust_source::SourceFile;
    use super::*;

    fn code() -> CodeIndex {
        let lib = SourceFile {
            path: "sandbox/src/lib.rs".into(),
            crate_name: "pyrun_sandbox".into(),
            module: vec![],
            text: "pub mod helpers; pub const PROTECTED_NAMES: &[&str] = &[];\n\
                   pub struct Sandbox;\n\
                   impl Sandbox { pub fn slot_granting(&self) {} pub fn spawn(&self) {} }\n\
                   use tokio::io::unix::AsyncFd; fn f(fd: AsyncFd<u8>) { fd.register_with_interest(); }\n\
                   fn g() -> std::process::Command { std::process::Command::new(\"python\") }"
                .into(),
        };
        let helpers = SourceFile {
            path: "sandbox/src/helpers.rs".into(),
            crate_name: "pyrun_sandbox".into(),
            module: vec!["helpers".into()],
            text: "pub fn output() {} pub fn close() {}".into(),
        };
        CodeIndex::build([&lib, &helpers])
    }

    fn check(doc: &str) -> Vec<String> {
        let externals = ["std", "tokio"].map(String::from).into_iter().collect();
        unknown_names("ARCHITECTURE.md", &code_spans(doc), &code(), &externals).1
    }

    #[test]
    fn spans_are_read_outside_fences_and_across_lines() {
        let spans = code_spans("a `one` b ``two ` x``\n```\n`fenced`\n```\n`three\nlines` `four`");
        let texts: Vec<_> = spans.iter().map(|s| (s.line, s.text.as_str())).collect();
        assert_eq!(spans[1].after_previous, "b");
        assert_eq!(
            texts,
            [(1, "one"), (1, "two ` x"), (5, "three lines"), (6, "four")]
        );
    }

    #[test]
    fn a_method_the_type_does_not_have_is_named_with_its_line() {
        assert!(check(
            "`Sandbox::slot_granting`, `pyrun_sandbox::Sandbox::spawn`, `helpers::output`"
        )
        .is_empty());
        let problems = check("one\n(`Sandbox::slot_writing`: with more folders)");
        assert_eq!(
            problems,
            ["ARCHITECTURE.md:2: names `Sandbox::slot_writing`, but type `Sandbox` has no fn, constant or variant `slot_writing`"]
        );
        assert_eq!(
            check("`helpers::spawn_helper`").len(),
            1,
            "a module without that item"
        );
        assert_eq!(
            check("`Sandboxes::spawn`").len(),
            1,
            "a type nobody defines or uses"
        );
    }

    #[test]
    fn names_of_other_crates_hold_when_the_code_uses_them() {
        assert!(
            check("`std::process::Command` `AsyncFd::register_with_interest` `tokio::io`")
                .is_empty()
        );
        assert_eq!(check("`AsyncFd::register_with_wishes`").len(), 1);
    }

    #[test]
    fn bare_types_constants_and_calls_must_exist() {
        assert!(
            check("`Sandbox` `PROTECTED_NAMES` `spawn()` `--flag` `slot_granting` `HEAD` `x`")
                .is_empty()
        );
        assert_eq!(
            check("`Sandboxes` `PROTECTED_PATHS` `spawn_all()` `run_call`").len(),
            4
        );
    }

    #[test]
    fn a_path_that_does_not_exist_is_named_with_its_line() {
        let repo = RepoTree {
            top_level: ["server", "docs"].map(String::from).into(),
            files: [
                "server/src/main.rs",
                "server/src/transport/http.rs",
                "docs/a.md",
            ]
            .map(String::from)
            .into(),
            dirs: ["server", "server/src", "server/src/transport", "docs"]
                .map(String::from)
                .into(),
        };
        let spans = code_spans("`server/src/main.rs` `server/src/` `transport/http.rs` `http.rs` `/projects` `output/` `pyrun://x/y.rs`\n`server/src/nope.rs` `tools/gone.rs` `gone.rs` `docs/gone/`");
        let (named, problems) = missing_paths("ARCHITECTURE.md", &spans, &repo);
        assert_eq!(named, 8);
        assert_eq!(
            problems,
            [
                "ARCHITECTURE.md:2: names `server/src/nope.rs`, which does not exist",
                "ARCHITECTURE.md:2: names `tools/gone.rs`, but no file of the repository is (or ends in) that path",
                "ARCHITECTURE.md:2: names `gone.rs`, but no file of the repository is (or ends in) that path",
                "ARCHITECTURE.md:2: names `docs/gone/`, which does not exist",
            ]
        );
    }

    #[test]
    fn a_name_placed_in_a_file_that_does_not_define_it_is_named() {
        let repo = RepoTree {
            top_level: ["sandbox"].map(String::from).into(),
            files: ["sandbox/src/lib.rs", "sandbox/src/helpers.rs"]
                .map(String::from)
                .into(),
            dirs: ["sandbox", "sandbox/src"].map(String::from).into(),
        };
        let doc = "the names (`PROTECTED_NAMES` of `sandbox/src/lib.rs`), `helpers::output` in\n\
                   `helpers.rs`, `Sandbox::spawn` in `sandbox/src/`, `close` of `helpers.rs`\n\
                   `PROTECTED_NAMES` of `sandbox/src/helpers.rs`; `Sandbox`, `sandbox/src/helpers.rs`\n\
                   - `sandbox/src/lib.rs` — `Sandbox`: the entry\n\
                   - `sandbox/src/helpers.rs` — `Sandbox`: the entry";
        let problems = misplaced_names("ARCHITECTURE.md", &code_spans(doc), &code(), &repo);
        assert_eq!(
            problems,
            [
                "ARCHITECTURE.md:3: places `PROTECTED_NAMES` in `sandbox/src/helpers.rs`, but it is defined in sandbox/src/lib.rs",
                "ARCHITECTURE.md:5: places `Sandbox` in `sandbox/src/helpers.rs`, but it is defined in sandbox/src/lib.rs",
            ]
        );
    }
}
