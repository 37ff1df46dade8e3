//! The settings given to this start — flags before or after a subcommand, the environment,
//! `.env` — as the words that give them again: what `config` writes into a stdio snippet, so
//! that an assistant starts the server set up as it is here. A secret's value is never kept:
//! only its name, to say where to set it.

use std::path::PathBuf;

use clap::parser::ValueSource;

/// The help headings of the settings only `--transport http` uses (a stdio snippet leaves them
/// out, saying so).
pub(super) const HTTP_ONLY: [&str; 3] = [
    "HTTP transport",
    "Public URL (tunnel)",
    "OAuth (Claude's connectors)",
];

/// One setting given, other than a default.
#[derive(Clone, PartialEq, Eq)]
pub struct GivenSetting {
    /// Its flag, e.g. `--timeout`.
    pub flag: String,
    /// The variable that also sets it.
    pub variable: Option<String>,
    /// The words that give it again (`--timeout`, `120`; `--allow-network`); none for a secret.
    pub words: Vec<String>,
    /// A token, a password, or a URL with credentials: never written anywhere.
    pub secret: bool,
    /// Whether only `--transport http` uses it.
    pub http_only: bool,
}

// A secret's words are empty; the flag and variable names are no secret.
impl std::fmt::Debug for GivenSetting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GivenSetting")
            .field("flag", &self.flag)
            .field("words", &self.words.len())
            .finish()
    }
}

/// The settings of `command` that `matches` got from the command line or a variable, except
/// those the snippet writes itself (the transport, the folder, the interpreter) and the hidden
/// ones (tests only).
pub(super) fn given(matches: &clap::ArgMatches, command: &clap::Command) -> Vec<GivenSetting> {
    const WRITTEN_APART: [&str; 3] = ["transport", "projects_dir", "python"];
    let mut given = Vec::new();
    for arg in command.get_arguments() {
        let id = arg.get_id().as_str();
        let Some(long) = arg.get_long() else {
            continue;
        };
        let source = matches.value_source(id);
        let chosen = matches!(
            source,
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        );
        if !chosen || arg.is_hide_set() || WRITTEN_APART.contains(&id) {
            continue;
        }
        let flag = format!("--{long}");
        let raw: Vec<String> = matches
            .get_raw(id)
            .into_iter()
            .flatten()
            .map(|v| v.to_string_lossy().into_owned())
            .collect();
        let secret = arg.is_hide_env_values_set() || raw.iter().any(|v| has_credentials(v));
        let words = if secret {
            Vec::new()
        } else {
            words_of(matches, id, arg, &flag, &raw)
        };
        given.push(GivenSetting {
            flag,
            variable: arg.get_env().map(|v| v.to_string_lossy().into_owned()),
            words,
            secret,
            http_only: arg
                .get_help_heading()
                .is_some_and(|heading| HTTP_ONLY.contains(&heading)),
        });
    }
    given
}

/// The words for one setting: a boolean as its flag alone (or `=false`), a path made absolute
/// (the assistant starts the server from another folder), anything else as it was given, one
/// flag per value.
fn words_of(
    matches: &clap::ArgMatches,
    id: &str,
    arg: &clap::Arg,
    flag: &str,
    raw: &[String],
) -> Vec<String> {
    if let Ok(Some(on)) = matches.try_get_one::<bool>(id) {
        let optional_value = arg.get_num_args().is_some_and(|n| n.min_values() == 0);
        return match (optional_value, *on) {
            (true, true) => vec![flag.to_owned()],
            (true, false) => vec![format!("{flag}=false")],
            (false, on) => vec![flag.to_owned(), if on { "on" } else { "off" }.to_owned()],
        };
    }
    let values: Vec<String> = match matches.try_get_many::<PathBuf>(id) {
        Ok(Some(paths)) => paths
            .zip(raw)
            .map(|(path, given)| {
                // `--audit-log off` is a word, not a file.
                if given.eq_ignore_ascii_case("off") {
                    return given.clone();
                }
                std::path::absolute(path)
                    .unwrap_or_else(|_| path.clone())
                    .display()
                    .to_string()
            })
            .collect(),
        _ => raw.to_vec(),
    };
    values
        .into_iter()
        .flat_map(|value| [flag.to_owned(), value])
        .collect()
}

/// Whether `value` is a URL with a user or password in it (`https://user:token@index/simple`).
pub(super) fn has_credentials(value: &str) -> bool {
    value
        .split_once("://")
        .map(|(_, rest)| rest.split(['/', '?', '#']).next().unwrap_or(""))
        .is_some_and(|authority| authority.contains('@'))
}
