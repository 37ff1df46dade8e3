//! The MCP layer's room rules, read from the server's source: the tool rooms (the entries of
//! `server/src/mcp/tools/`, so a new room is included the day it is made) never name each other;
//! only the protocol layer (the handler's dispatch) and the modules that declare the rooms name
//! them, so `call/` and `present/`, below the rooms, name none; `server/src/app` names nothing of
//! `mcp`.
//!
//! A name is a path the code writes from `crate::`, `super::` or `self::` (in `use` trees too),
//! resolved against the file's place in the crate, so `use super::sessions` in `tools/run.rs` and
//! `crate::mcp::tools::sessions::x` are the same arrow.

use std::collections::BTreeSet;

use super::rust_source::{module_path, tokenize, Token};

/// A path a file names and the line it is on.
#[derive(Debug, PartialEq, Eq)]
pub struct Named {
    pub line: usize,
    /// Resolved from the crate root.
    pub path: Vec<String>,
    /// As written.
    pub written: String,
}

/// The module paths a Rust file names, resolved from the crate root. `module` is the file's own
/// module path; an inline `mod name { … }` (tests) adds to it inside its braces. Paths not starting
/// at `crate`, `super` or `self` (another crate's, a local name's) are left out, except
/// `tools::…`, kept as written so an alias of the rooms' module is seen too.
pub fn named_paths(module: &[String], text: &str) -> Vec<Named> {
    let tokens = tokenize(text);
    let ident = |k: usize| match tokens.get(k).map(|t| &t.token) {
        Some(Token::Ident(w)) => Some(w.as_str()),
        _ => None,
    };
    let is_punct = |k: usize, c: char| matches!(tokens.get(k).map(|t| &t.token), Some(Token::Punct(p)) if *p == c);
    let path_sep = |k: usize| is_punct(k, ':') && is_punct(k + 1, ':');
    let mut named = Vec::new();
    // The module the code at `k` is in, and the brace depths where inline modules opened.
    let mut here = module.to_vec();
    let (mut depth, mut inline_opened) = (0usize, Vec::new());
    let mut k = 0;
    while k < tokens.len() {
        if ident(k) == Some("mod") && is_punct(k + 2, '{') {
            if let Some(name) = ident(k + 1) {
                here.push(name.to_owned());
                inline_opened.push(depth);
                depth += 1;
                k += 3;
                continue;
            }
        }
        if is_punct(k, '{') {
            depth += 1;
        } else if is_punct(k, '}') {
            depth = depth.saturating_sub(1);
            if inline_opened.last() == Some(&depth) {
                inline_opened.pop();
                here.pop();
            }
        }
        let starts_path = matches!(ident(k), Some("crate" | "super" | "self" | "tools"))
            && !(k >= 2 && path_sep(k - 2));
        if ident(k) == Some("use") {
            // A use tree: expand its `{…}` groups into whole paths.
            let end = (k..tokens.len())
                .find(|&j| is_punct(j, ';'))
                .unwrap_or(tokens.len());
            let mut prefixes: Vec<Vec<String>> = vec![Vec::new()];
            let mut current: Vec<String> = Vec::new();
            for (j, token) in tokens.iter().enumerate().take(end).skip(k + 1) {
                match &token.token {
                    Token::Ident(w) if w != "as" && !(j > 0 && ident(j - 1) == Some("as")) => {
                        current.push(w.clone())
                    }
                    Token::Punct('{') => {
                        let mut prefix = prefixes.last().cloned().unwrap_or_default();
                        prefix.append(&mut current);
                        prefixes.push(prefix);
                    }
                    Token::Punct(',') | Token::Punct('}') => {
                        if !current.is_empty() {
                            let mut path = prefixes.last().cloned().unwrap_or_default();
                            path.append(&mut current);
                            push_resolved(&mut named, &here, &path, token.line);
                        }
                        if token.token == Token::Punct('}') {
                            prefixes.pop();
                        }
                    }
                    _ => {}
                }
            }
            if !current.is_empty() {
                let mut path = prefixes.last().cloned().unwrap_or_default();
                path.append(&mut current);
                let line = tokens[end.saturating_sub(1)].line;
                push_resolved(&mut named, &here, &path, line);
            }
            k = end + 1;
            continue;
        }
        if starts_path && path_sep(k + 1) {
            let mut path = vec![ident(k).unwrap_or_default().to_owned()];
            let mut j = k + 1;
            while path_sep(j) {
                match ident(j + 2) {
                    Some(w) => path.push(w.to_owned()),
                    None => break,
                }
                j += 3;
            }
            push_resolved(&mut named, &here, &path, tokens[k].line);
            k = j;
            continue;
        }
        k += 1;
    }
    named
}

fn push_resolved(named: &mut Vec<Named>, module: &[String], path: &[String], line: usize) {
    if let Some(resolved) = resolve(module, path) {
        named.push(Named {
            line,
            path: resolved,
            written: path.join("::"),
        });
    }
}

/// A path written in `module`, from the crate root; `None` for one that starts elsewhere.
fn resolve(module: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut at: Vec<String> = match path.first().map(String::as_str) {
        Some("crate") => Vec::new(),
        Some("self") | Some("super") => module.to_vec(),
        // `tools::x` as written: read as the rooms' module wherever it is named from.
        Some("tools") => vec!["mcp".to_owned()],
        _ => return None,
    };
    let mut rest = path.iter().peekable();
    // `crate` and `self` are where the walk starts; each `super` is a step up.
    if matches!(
        path.first().map(String::as_str),
        Some("crate") | Some("self")
    ) {
        rest.next();
    }
    while rest.peek().map(|s| s.as_str()) == Some("super") {
        rest.next();
        at.pop()?;
    }
    at.extend(rest.filter(|s| s.as_str() != "self").cloned());
    Some(at)
}

/// A Rust file of the server crate: its path under `server/src/` and its text.
pub struct ServerFile {
    pub path: String,
    pub text: String,
}

/// The module the rooms are in.
const ROOMS_MODULE: [&str; 2] = ["mcp", "tools"];

/// The tool rooms, from the files themselves: each entry of `mcp/tools/` (a file or a folder).
pub fn rooms(files: &[ServerFile]) -> BTreeSet<String> {
    files
        .iter()
        .filter_map(|f| f.path.strip_prefix("mcp/tools/"))
        .filter_map(|rest| rest.split('/').next())
        .map(|entry| entry.trim_end_matches(".rs").to_owned())
        .filter(|entry| entry != "mod")
        .collect()
}

/// The room a module path is in (itself or one of its submodules), if any.
fn room_of<'a>(path: &'a [String], rooms: &BTreeSet<String>) -> Option<&'a String> {
    let inside =
        path.len() > ROOMS_MODULE.len() && path.iter().zip(ROOMS_MODULE).all(|(a, b)| a == b);
    inside
        .then(|| &path[ROOMS_MODULE.len()])
        .filter(|room| rooms.contains(*room))
}

/// Every arrow the room rules forbid, as messages naming the file, the line and the path.
pub fn room_problems(files: &[ServerFile]) -> Vec<String> {
    let rooms = rooms(files);
    let mut problems = Vec::new();
    for file in files {
        let module = module_path(&file.path);
        let own_room = room_of(&module, &rooms);
        // Who may name every room: the modules that declare them, and the protocol layer, whose
        // handler dispatches to them.
        let composes = matches!(file.path.as_str(), "mcp/mod.rs" | "mcp/tools/mod.rs")
            || file.path.starts_with("mcp/protocol/");
        for named in named_paths(&module, &file.text) {
            if file.path.starts_with("app/")
                && named.path.first().map(String::as_str) == Some("mcp")
            {
                problems.push(format!(
                    "server/src/{}:{}: `app` names the MCP layer (`{}`): app sits below mcp; \
                     keep MCP state in mcp",
                    file.path, named.line, named.written
                ));
                continue;
            }
            let Some(named_room) = room_of(&named.path, &rooms) else {
                continue;
            };
            if composes || own_room == Some(named_room) {
                continue;
            }
            let who = match own_room {
                Some(room) => format!("the room `{room}` names the room `{named_room}`"),
                None => format!("this module names the room `{named_room}`"),
            };
            problems.push(format!(
                "server/src/{}:{}: {who} (`{}`): tool rooms are named only by the protocol layer \
                 (mcp/protocol/) and mcp/tools/mod.rs; move what both need to call/, present/ or \
                 protocol/",
                file.path, named.line, named.written,
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, text: &str) -> ServerFile {
        ServerFile {
            path: path.into(),
            text: text.into(),
        }
    }

    fn module(path: &str) -> Vec<String> {
        module_path(path)
    }

    #[test]
    fn paths_are_resolved_from_the_file_s_place() {
        let named = named_paths(
            &module("mcp/tools/run.rs"),
            "use super::{sessions::Session, super::present::reply};\nuse crate::mcp::tools::{self as t, background};\nfn f() { super::inline::go(); self::x(); tokio::spawn(); }\n// super::artifacts::gone",
        );
        let got: Vec<_> = named.iter().map(|n| (n.line, n.path.join("::"))).collect();
        let in_tests = named_paths(
            &module("mcp/tools/run.rs"),
            "fn f() {}\nmod tests { use super::super::sessions::x; fn g() { super::f() } }\nuse super::inline;",
        );
        let got_tests: Vec<_> = in_tests.iter().map(|n| n.path.join("::")).collect();
        assert_eq!(
            got_tests,
            [
                "mcp::tools::sessions::x",
                "mcp::tools::run::f",
                "mcp::tools::inline"
            ]
        );
        assert_eq!(
            got,
            [
                (1, "mcp::tools::sessions::Session".to_owned()),
                (1, "mcp::present::reply".to_owned()),
                (2, "mcp::tools".to_owned()),
                (2, "mcp::tools::background".to_owned()),
                (3, "mcp::tools::inline::go".to_owned()),
                (3, "mcp::tools::run::x".to_owned()),
            ]
        );
    }

    fn layout_with(extra: ServerFile) -> Vec<String> {
        let mut files = vec![
            file("mcp/mod.rs", "mod tools; mod protocol; mod present;"),
            file("mcp/tools/mod.rs", "pub mod run; pub mod sessions; pub mod packages;"),
            file("mcp/tools/run.rs", "use super::super::present::reply; use crate::mcp::protocol::Ctx; use super::run::x;"),
            file("mcp/tools/sessions.rs", "use crate::mcp::present::cut;"),
            file("mcp/tools/packages/mod.rs", "mod install; use self::install::go; use super::packages::install;"),
            file("mcp/tools/packages/install.rs", "use super::super::packages::x;"),
            file("mcp/protocol/handler.rs", "use crate::mcp::tools::{run, sessions, packages};"),
            file("mcp/present/reply.rs", "use crate::app::App;"),
            file("app/mod.rs", "use crate::config::Config;"),
        ];
        files.push(extra);
        room_problems(&files)
    }

    #[test]
    fn rooms_by_folders_pass_when_no_room_names_another() {
        assert!(layout_with(file("mcp/present/cut.rs", "")).is_empty());
    }

    #[test]
    fn a_sideways_import_between_rooms_is_named() {
        assert_eq!(
            layout_with(file("mcp/tools/inline.rs", "fn f() {}\nuse super::sessions::start;")),
            ["server/src/mcp/tools/inline.rs:2: the room `inline` names the room `sessions` (`super::sessions::start`): tool rooms are named only by the protocol layer (mcp/protocol/) and mcp/tools/mod.rs; move what both need to call/, present/ or protocol/"]
        );
        assert_eq!(
            layout_with(file(
                "mcp/tools/packages/list.rs",
                "use super::super::run::x;"
            ))
            .len(),
            1
        );
        assert_eq!(
            layout_with(file(
                "mcp/tools/inline.rs",
                "use crate::mcp::tools; fn f() { tools::run::go() }"
            ))
            .len(),
            1
        );
    }

    #[test]
    fn present_names_no_room_and_app_nothing_of_mcp() {
        assert_eq!(
            layout_with(file(
                "mcp/present/hint.rs",
                "use crate::mcp::tools::run::RunArgs;"
            ))
            .len(),
            1
        );
        let problems = layout_with(file("app/build.rs", "use crate::mcp::McpState;"));
        assert_eq!(problems, ["server/src/app/build.rs:1: `app` names the MCP layer (`crate::mcp::McpState`): app sits below mcp; keep MCP state in mcp"]);
    }
}
