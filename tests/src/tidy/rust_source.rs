//! What the tidy test knows of the workspace's Rust code, read as text: a small lexer (comments
//! dropped, string literals kept apart, so a name that lives on only in a comment counts for
//! nothing) and an index of what is defined where — the items of each module, the members of each
//! type (`fn`s and constants of its `impl` blocks, a trait's items, an enum's variants) and every
//! word the code uses. Textual on purpose: no parser crate to build, and the rules it serves
//! (`Type::method` exists, a room names no other room) need only items and paths, not types.

use std::collections::{BTreeMap, BTreeSet};

/// One token of Rust source. Numbers and lifetimes are dropped; `::` is two `Punct(':')`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    Ident(String),
    Punct(char),
    /// A string literal's contents (escapes left as written).
    Str(String),
}

/// A token and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spanned {
    pub token: Token,
    pub line: usize,
}

/// Splits Rust source into tokens. Never fails: text it does not understand becomes punctuation,
/// which is enough for the item and path shapes the checks look for.
pub fn tokenize(src: &str) -> Vec<Spanned> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let mut line = 1;
    while i < chars.len() {
        let c = chars[i];
        let start_line = line;
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && chars.get(i + 1) == Some(&'*') {
            // Block comments nest in Rust.
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    if chars[i] == '\n' {
                        line += 1;
                    }
                    i += 1;
                }
            }
        } else if let Some((len, hashes)) = raw_string_start(&chars, i) {
            // r"…", r#"…"#, br"…", cr"…": no escapes; ends at a quote followed by the hashes.
            let mut j = i + len;
            let body_start = j;
            loop {
                if j >= chars.len() {
                    break;
                }
                if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
                    break;
                }
                if chars[j] == '\n' {
                    line += 1;
                }
                j += 1;
            }
            let body: String = chars[body_start..j.min(chars.len())].iter().collect();
            out.push(Spanned {
                token: Token::Str(body),
                line: start_line,
            });
            i = j + 1 + hashes;
        } else if c == '"' || ((c == 'b' || c == 'c') && chars.get(i + 1) == Some(&'"')) {
            let mut j = if c == '"' { i + 1 } else { i + 2 };
            let body_start = j;
            while j < chars.len() && chars[j] != '"' {
                if chars[j] == '\\' {
                    j += 1;
                }
                if chars.get(j) == Some(&'\n') {
                    line += 1;
                }
                j += 1;
            }
            let body: String = chars[body_start..j.min(chars.len())].iter().collect();
            out.push(Spanned {
                token: Token::Str(body),
                line: start_line,
            });
            i = j + 1;
        } else if c == '\'' || (c == 'b' && chars.get(i + 1) == Some(&'\'')) {
            // A char literal ('a', '\n', '\u{1F600}', b'x') or a lifetime ('a, 'static).
            let q = if c == 'b' { i + 1 } else { i };
            if chars.get(q + 1) == Some(&'\\') {
                let mut j = q + 2;
                while j < chars.len() && chars[j] != '\'' {
                    j += 1;
                }
                i = j + 1;
            } else if chars.get(q + 2) == Some(&'\'') {
                i = q + 3;
            } else {
                // A lifetime: skip the quote and its name.
                let mut j = q + 1;
                while j < chars.len() && is_ident_char(chars[j]) {
                    j += 1;
                }
                i = j;
            }
        } else if is_ident_start(c) {
            let mut j = i;
            while j < chars.len() && is_ident_char(chars[j]) {
                j += 1;
            }
            let mut word: String = chars[i..j].iter().collect();
            // Raw identifiers (`r#type`) are the identifier.
            if word == "r"
                && chars.get(j) == Some(&'#')
                && chars.get(j + 1).is_some_and(|&n| is_ident_start(n))
            {
                let mut k = j + 1;
                while k < chars.len() && is_ident_char(chars[k]) {
                    k += 1;
                }
                word = chars[j + 1..k].iter().collect();
                j = k;
            }
            out.push(Spanned {
                token: Token::Ident(word),
                line: start_line,
            });
            i = j;
        } else if c.is_ascii_digit() {
            // Numbers (with suffixes, `1_000`, `0x1f`, `1.5e3`) carry no names.
            let mut j = i;
            while j < chars.len()
                && (is_ident_char(chars[j])
                    || (chars[j] == '.' && chars.get(j + 1).is_some_and(char::is_ascii_digit)))
            {
                j += 1;
            }
            i = j;
        } else {
            out.push(Spanned {
                token: Token::Punct(c),
                line: start_line,
            });
            i += 1;
        }
    }
    out
}

fn is_ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn is_ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// At `i`, the start of a raw string literal: the length of its opening (prefix, hashes, quote)
/// and the number of hashes.
fn raw_string_start(chars: &[char], i: usize) -> Option<(usize, usize)> {
    // The previous character must not continue an identifier (`bar"` is not a raw string).
    if i > 0 && is_ident_char(chars[i - 1]) {
        return None;
    }
    let mut j = i;
    if matches!(chars.get(j), Some('b') | Some('c')) {
        j += 1;
    }
    if chars.get(j) != Some(&'r') {
        return None;
    }
    j += 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    (chars.get(j) == Some(&'"')).then_some((j + 1 - i, hashes))
}

/// Where a Rust file sits in its crate: the module path from the crate root, e.g. `mcp::tools::run`
/// for `server/src/mcp/tools/run.rs` (empty for `lib.rs`/`main.rs`).
pub fn module_path(relative_to_src: &str) -> Vec<String> {
    let mut parts: Vec<String> = relative_to_src
        .trim_end_matches(".rs")
        .split('/')
        .map(str::to_owned)
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod")) {
        parts.pop();
    }
    if parts.len() == 1 && matches!(parts[0].as_str(), "lib" | "main") {
        parts.clear();
    }
    parts
}

/// A Rust file of the workspace: its path from the repository root, the crate's library name and
/// the file's module path in it.
pub struct SourceFile {
    pub path: String,
    pub crate_name: String,
    pub module: Vec<String>,
    pub text: String,
}

/// What the workspace's code defines and uses, by simple name (several modules or types of one
/// name are merged: "some file defines it" is the question).
#[derive(Debug, Default)]
pub struct CodeIndex {
    /// Module (or crate) name → the names of its items: fns, types, constants, submodules,
    /// macros and what it re-exports with `pub use`.
    pub modules: BTreeMap<String, BTreeSet<String>>,
    /// Type or trait name → its members: the fns, constants and associated types of its `impl`
    /// blocks (inherent or trait impls), a trait's items, an enum's variants.
    pub members: BTreeMap<String, BTreeSet<String>>,
    /// Names declared as a struct, enum, union, trait or type alias anywhere.
    pub types: BTreeSet<String>,
    /// Every fn name defined anywhere (methods included).
    pub fns: BTreeSet<String>,
    /// Every identifier the code uses, and every word of its string literals.
    pub words: BTreeSet<String>,
    /// Item or member name → the files (paths from the repository root) that define one so named.
    pub defined_in: BTreeMap<String, BTreeSet<String>>,
}

/// What a `{` opens, for the items found inside it.
#[derive(Debug, Clone)]
enum Frame {
    /// A module's body; the name under which its items are filed.
    Module(String),
    /// An `impl` block, a trait or an enum: the type whose members its items are.
    Members(String, FrameKind),
    /// Anything else: a fn body, a struct's fields, a block.
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum FrameKind {
    Impl,
    Trait,
    Enum,
}

impl CodeIndex {
    pub fn build<'a>(files: impl IntoIterator<Item = &'a SourceFile>) -> Self {
        let mut index = CodeIndex::default();
        for file in files {
            index.add_file(file);
        }
        index
    }

    fn add_file(&mut self, file: &SourceFile) {
        let tokens = tokenize(&file.text);
        for t in &tokens {
            match &t.token {
                Token::Ident(w) => {
                    self.words.insert(w.clone());
                }
                Token::Str(s) => {
                    for w in s
                        .split(|c: char| !is_ident_char(c))
                        .filter(|w| !w.is_empty())
                    {
                        self.words.insert(w.to_owned());
                    }
                }
                Token::Punct(_) => {}
            }
        }
        let own = file
            .module
            .last()
            .cloned()
            .unwrap_or_else(|| file.crate_name.clone());
        self.modules.entry(own.clone()).or_default();
        let mut stack: Vec<Frame> = vec![Frame::Module(own)];
        // What the next `{` opens, once an item header announced it.
        let mut pending: Option<Frame> = None;
        // Inside an enum's body: whether the next identifier (after attributes) is a variant.
        let mut expect_variant = false;
        let mut paren_depth = 0usize;
        let ident = |k: usize| match tokens.get(k).map(|t| &t.token) {
            Some(Token::Ident(w)) => Some(w.as_str()),
            _ => None,
        };
        let punct = |k: usize| match tokens.get(k).map(|t| &t.token) {
            Some(Token::Punct(c)) => Some(*c),
            _ => None,
        };
        let mut k = 0;
        while k < tokens.len() {
            let in_enum_body = matches!(stack.last(), Some(Frame::Members(_, FrameKind::Enum)));
            match &tokens[k].token {
                Token::Punct('{') => {
                    stack.push(pending.take().unwrap_or(Frame::Other));
                    expect_variant =
                        matches!(stack.last(), Some(Frame::Members(_, FrameKind::Enum)));
                    paren_depth = 0;
                }
                Token::Punct('}') => {
                    if stack.len() > 1 {
                        stack.pop();
                    }
                    pending = None;
                    expect_variant = false;
                }
                Token::Punct(';') => pending = None,
                Token::Punct('(') | Token::Punct('[') => paren_depth += 1,
                Token::Punct(')') | Token::Punct(']') => {
                    paren_depth = paren_depth.saturating_sub(1)
                }
                Token::Punct(',') if in_enum_body && paren_depth == 0 => expect_variant = true,
                // An attribute on a variant: skip `#[…]` whole.
                Token::Punct('#') if in_enum_body && punct(k + 1) == Some('[') => {
                    let mut depth = 0;
                    let mut j = k + 1;
                    while j < tokens.len() {
                        match punct(j) {
                            Some('[') => depth += 1,
                            Some(']') => {
                                depth -= 1;
                                if depth == 0 {
                                    break;
                                }
                            }
                            _ => {}
                        }
                        j += 1;
                    }
                    k = j;
                }
                Token::Ident(word) => {
                    if in_enum_body && expect_variant && paren_depth == 0 {
                        if let Some(Frame::Members(name, _)) = stack.last() {
                            let name = name.clone();
                            self.members.entry(name).or_default().insert(word.clone());
                        }
                        expect_variant = false;
                    } else {
                        let prev = k.checked_sub(1).map(|p| &tokens[p].token);
                        match word.as_str() {
                            "impl" if item_position(prev) => {
                                if let Some(name) = impl_self_type(&tokens, k + 1) {
                                    pending = Some(Frame::Members(name, FrameKind::Impl));
                                }
                            }
                            "trait" | "enum" => {
                                if let Some(name) = ident(k + 1) {
                                    self.types.insert(name.to_owned());
                                    self.file_item(&stack, name, &file.path);
                                    let kind = if word == "trait" {
                                        FrameKind::Trait
                                    } else {
                                        FrameKind::Enum
                                    };
                                    pending = Some(Frame::Members(name.to_owned(), kind));
                                    k += 1;
                                }
                            }
                            "struct" | "union" | "type" => {
                                if let Some(name) = ident(k + 1) {
                                    if word != "type"
                                        || matches!(stack.last(), Some(Frame::Module(_)))
                                    {
                                        self.types.insert(name.to_owned());
                                    }
                                    self.file_item(&stack, name, &file.path);
                                    k += 1;
                                }
                            }
                            "mod" => {
                                if let Some(name) = ident(k + 1) {
                                    self.file_item(&stack, name, &file.path);
                                    self.modules.entry(name.to_owned()).or_default();
                                    pending = Some(Frame::Module(name.to_owned()));
                                    k += 1;
                                }
                            }
                            "fn" => {
                                if let Some(name) = ident(k + 1) {
                                    self.fns.insert(name.to_owned());
                                    self.file_item(&stack, name, &file.path);
                                    k += 1;
                                }
                            }
                            "const" | "static" => {
                                let mut j = k + 1;
                                if ident(j) == Some("mut") {
                                    j += 1;
                                }
                                // `const fn` is a fn; `const _` names nothing.
                                if let Some(name) = ident(j).filter(|n| {
                                    !matches!(*n, "fn" | "unsafe" | "async" | "extern" | "_")
                                }) {
                                    if punct(j + 1) == Some(':') {
                                        self.file_item(&stack, name, &file.path);
                                        k = j;
                                    }
                                }
                            }
                            "macro_rules" if punct(k + 1) == Some('!') => {
                                if let Some(name) = ident(k + 2) {
                                    self.file_item(&stack, name, &file.path);
                                    k += 2;
                                }
                            }
                            "use" if is_pub(&tokens, k) => {
                                // A re-export: the names it brings in become the module's items.
                                let mut j = k + 1;
                                while j < tokens.len() && punct(j) != Some(';') {
                                    if let Some(name) = ident(j).filter(|n| {
                                        !matches!(*n, "self" | "super" | "crate" | "as")
                                    }) {
                                        if let Some(Frame::Module(m)) = stack.last() {
                                            let m = m.clone();
                                            self.modules
                                                .entry(m)
                                                .or_default()
                                                .insert(name.to_owned());
                                        }
                                    }
                                    j += 1;
                                }
                                k = j;
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
            k += 1;
        }
    }

    /// Files an item under the innermost module, type or trait it is directly in (items inside fn
    /// bodies are nobody's).
    fn file_item(&mut self, stack: &[Frame], name: &str, path: &str) {
        if !matches!(stack.last(), Some(Frame::Other) | None) {
            self.defined_in
                .entry(name.to_owned())
                .or_default()
                .insert(path.to_owned());
        }
        match stack.last() {
            Some(Frame::Module(m)) => {
                self.modules
                    .entry(m.clone())
                    .or_default()
                    .insert(name.to_owned());
            }
            Some(Frame::Members(t, kind)) if *kind != FrameKind::Enum => {
                self.members
                    .entry(t.clone())
                    .or_default()
                    .insert(name.to_owned());
            }
            _ => {}
        }
    }
}

/// Whether `impl` at this place starts an item (`impl X {`), not a type (`-> impl Trait`,
/// `x: impl Fn()`, `&impl Read`).
fn item_position(prev: Option<&Token>) -> bool {
    match prev {
        None => true,
        Some(Token::Punct(c)) => matches!(c, '}' | ';' | '{' | ']'),
        Some(Token::Ident(w)) => matches!(w.as_str(), "unsafe" | "default"),
        Some(Token::Str(_)) => false,
    }
}

/// Whether the token before `use` at `k` makes it public (`pub use`, `pub(crate) use`).
fn is_pub(tokens: &[Spanned], k: usize) -> bool {
    let at = |j: usize| &tokens[j].token;
    match k.checked_sub(1).map(at) {
        Some(Token::Ident(w)) => w == "pub",
        Some(Token::Punct(')')) => {
            // Walk back over `( … )` to see `pub`.
            let mut j = k - 1;
            while j > 0 && *at(j) != Token::Punct('(') {
                j -= 1;
            }
            j > 0 && *at(j - 1) == Token::Ident("pub".to_owned())
        }
        _ => false,
    }
}

/// The type an `impl` header (tokens from `start` to its `{`) is for: the last path segment of
/// the type after `for`, or of the only type, outside any `<…>`.
fn impl_self_type(tokens: &[Spanned], start: usize) -> Option<String> {
    let mut header = Vec::new();
    let mut depth = 0i32;
    let mut k = start;
    // Skip the impl's own generics: `impl<T: X> …`.
    if tokens.get(k).map(|t| &t.token) == Some(&Token::Punct('<')) {
        loop {
            match tokens.get(k).map(|t| &t.token) {
                Some(Token::Punct('<')) => depth += 1,
                Some(Token::Punct('>')) => {
                    // `->` inside bounds (`F: Fn() -> T`) closes nothing.
                    let arrow = k > 0 && tokens[k - 1].token == Token::Punct('-');
                    if !arrow {
                        depth -= 1;
                    }
                }
                None => return None,
                _ => {}
            }
            k += 1;
            if depth == 0 {
                break;
            }
        }
    }
    while let Some(t) = tokens.get(k) {
        match &t.token {
            Token::Punct('{') | Token::Punct(';') => break,
            Token::Ident(w) if w == "where" && depth == 0 => break,
            Token::Punct('<') => depth += 1,
            Token::Punct('>') if !(k > 0 && tokens[k - 1].token == Token::Punct('-')) => depth -= 1,
            Token::Ident(w) if depth == 0 => header.push(w.clone()),
            _ => {}
        }
        k += 1;
    }
    let self_part = match header.iter().rposition(|w| w == "for") {
        Some(p) => &header[p + 1..],
        None => &header[..],
    };
    self_part
        .iter()
        .rfind(|w| !matches!(w.as_str(), "dyn" | "mut" | "const" | "unsafe"))
        .cloned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(src: &str) -> CodeIndex {
        let file = SourceFile {
            path: "x/src/lib.rs".into(),
            crate_name: "x".into(),
            module: vec![],
            text: src.into(),
        };
        CodeIndex::build([&file])
    }

    #[test]
    fn comments_and_strings_are_not_code() {
        let tokens = tokenize("// fn gone()\n/* fn /* nested */ gone2() */ let s = \"fn inside\"; let r = r#\"a \"b\" c\"#; 'x'; 'a: loop {}");
        let idents: Vec<_> = tokens
            .iter()
            .filter_map(|t| match &t.token {
                Token::Ident(w) => Some(w.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(idents, ["let", "s", "let", "r", "loop"]);
        let strs: Vec<_> = tokens
            .iter()
            .filter_map(|t| match &t.token {
                Token::Str(s) => Some(s.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(strs, ["fn inside", "a \"b\" c"]);
    }

    #[test]
    fn methods_are_filed_under_the_type_their_impl_is_for() {
        let ix = index(
            "pub struct Sandbox;\n\
             impl Sandbox { pub fn slot_granting(&self) -> impl Iterator<Item = u8> { fn inner() {} [].into_iter() } const MAX: u8 = 1; }\n\
             impl<T: Into<u8>> From<T> for Sandbox where T: Copy { fn from(_: T) -> Self { Sandbox } }\n\
             pub fn free(x: impl Fn() -> u8) { let _ = x; }\n\
             enum RunSource { #[allow(dead_code)] Inline(String, u8), File { path: u8 }, Empty }\n\
             trait Starter { fn spawn(&self); }\n\
             pub use inner::Reexported;\n\
             mod inner { pub struct Reexported; pub fn helper() {} }",
        );
        let sandbox = &ix.members["Sandbox"];
        assert!(
            sandbox.contains("slot_granting")
                && sandbox.contains("MAX")
                && sandbox.contains("from")
        );
        assert!(!sandbox.contains("inner") && !sandbox.contains("slot_writing"));
        assert!(!ix.members.contains_key("Iterator") && !ix.members.contains_key("Fn"));
        assert_eq!(
            ix.members["RunSource"].iter().collect::<Vec<_>>(),
            ["Empty", "File", "Inline"]
        );
        assert!(ix.members["Starter"].contains("spawn"));
        assert!(ix.modules["x"].contains("free") && ix.modules["x"].contains("Reexported"));
        assert!(ix.modules["inner"].contains("helper"));
        assert!(ix.types.contains("Sandbox") && ix.types.contains("RunSource"));
    }

    #[test]
    fn a_file_s_module_path_comes_from_its_place() {
        assert_eq!(module_path("mcp/tools/run.rs"), ["mcp", "tools", "run"]);
        assert_eq!(module_path("mcp/tools/mod.rs"), ["mcp", "tools"]);
        assert!(module_path("lib.rs").is_empty());
    }
}
