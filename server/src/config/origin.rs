//! A setting's value that fails validation, said in the words the user set it with: a value read
//! from a variable names the variable and where it was set (`.env` line N, or the environment),
//! never a flag the user did not type; a typed flag keeps clap's own message. A secret's value
//! (`hide_env_values`) is never repeated. Both stages: clap's refusals ([`explain`]) and the
//! checks of `Cli::resolve` whose messages open with the flag ([`Origins::reword`]).

use std::ffi::OsString;

use super::given::has_credentials;
use clap::error::{ContextKind, ContextValue, ErrorKind};

/// A variable's value that clap refused, explained.
#[derive(Debug, thiserror::Error)]
#[error("{variable}, set in {source_of}, {problem}\nhint: fix or remove it there (--{flag} sets the same setting and wins over it)")]
pub struct BadVariable {
    variable: String,
    /// `.env line 3` or `the environment`.
    source_of: String,
    /// What is wrong, e.g. `has the invalid value 'thirty': invalid digit found in string`.
    problem: String,
    flag: String,
}

/// Where a variable's value came from: `dotenv_line` answers for the variables `.env` set (with
/// the file's line, when found); the others came from the environment.
pub(super) fn explain(
    error: clap::Error,
    command: &clap::Command,
    typed: &[OsString],
    dotenv_line: impl Fn(&str) -> Option<Option<usize>>,
) -> Result<BadVariable, clap::Error> {
    if !matches!(
        error.kind(),
        ErrorKind::ValueValidation | ErrorKind::InvalidValue
    ) {
        return Err(error);
    }
    let Some(ContextValue::String(shown)) = error.get(ContextKind::InvalidArg) else {
        return Err(error);
    };
    // `--timeout <TIMEOUT>`, or `--allow-network[=<BOOL>]` for an on/off flag.
    let Some(flag) = shown.strip_prefix("--").map(|rest| {
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
            .unwrap_or(rest.len());
        &rest[..end]
    }) else {
        return Err(error);
    };
    let Some(arg) = command.get_arguments().find(|a| a.get_long() == Some(flag)) else {
        return Err(error);
    };
    let Some(variable) = arg.get_env().map(|v| v.to_string_lossy().into_owned()) else {
        return Err(error);
    };
    if was_typed(typed, flag) {
        return Err(error);
    }
    let source_of = match dotenv_line(&variable) {
        Some(Some(line)) => format!(".env line {line}"),
        Some(None) => ".env".to_owned(),
        None => "the environment".to_owned(),
    };
    // A URL with a user and password in it is a secret too, whatever the setting (a package
    // index's): the log of a supervisor keeps what the server prints.
    let given = match error.get(ContextKind::InvalidValue) {
        Some(ContextValue::String(value)) => Some(value.clone()),
        _ => None,
    };
    let secret = arg.is_hide_env_values_set() || given.as_deref().is_some_and(has_credentials);
    let value = match &given {
        Some(value) if !secret => format!("has the invalid value '{value}'"),
        _ => "has an invalid value (not shown: it is a secret)".to_owned(),
    };
    let reason = match error.get(ContextKind::ValidValue) {
        Some(ContextValue::Strings(valid)) => format!("it must be one of: {}", valid.join(", ")),
        _ => std::error::Error::source(&error).map_or_else(String::new, |s| s.to_string()),
    };
    let reason = match &given {
        Some(value) if secret && !value.is_empty() => reason.replace(value.as_str(), "…"),
        _ => reason,
    };
    let problem = if reason.is_empty() {
        value
    } else {
        format!("{value}: {reason}")
    };
    Ok(BadVariable {
        variable,
        source_of,
        problem,
        flag: flag.to_owned(),
    })
}

/// Where the settings came from, kept by `Cli::load` for the errors of the second stage.
#[derive(Clone, Default)]
pub struct Origins {
    typed: Vec<OsString>,
    /// The variables `.env` set, with the line that set each (when found).
    from_dotenv: Vec<(String, Option<usize>)>,
}

// The command line may hold a token: never printed.
impl std::fmt::Debug for Origins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Origins")
            .field("typed", &self.typed.len())
            .field("from_dotenv", &self.from_dotenv)
            .finish()
    }
}

impl Origins {
    pub(super) fn new(typed: Vec<OsString>, from_dotenv: Vec<(String, Option<usize>)>) -> Self {
        Self { typed, from_dotenv }
    }

    /// `--pass-env 'A=B' is not a valid variable name` → `PYRUN_PASS_ENV (set in .env line 4)
    /// 'A=B' is not…` when the value came from the variable; any other message as it is.
    pub(super) fn reword(&self, message: &str, command: &clap::Command) -> Option<String> {
        let rest = message.strip_prefix("--")?;
        let flag: String = rest
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect();
        let arg = command
            .get_arguments()
            .find(|a| a.get_long() == Some(flag.as_str()))?;
        let variable = arg.get_env()?.to_string_lossy().into_owned();
        if was_typed(&self.typed, &flag) || std::env::var_os(&variable).is_none() {
            return None;
        }
        let source = match self.from_dotenv.iter().find(|(key, _)| *key == variable) {
            Some((_, Some(line))) => format!(".env line {line}"),
            Some((_, None)) => ".env".to_owned(),
            None => "the environment".to_owned(),
        };
        Some(format!(
            "{variable} (set in {source}){}",
            &rest[flag.len()..]
        ))
    }
}

/// Whether the command line holds `--flag` or `--flag=…` (before a `--` that ends the flags).
fn was_typed(typed: &[OsString], flag: &str) -> bool {
    let long = format!("--{flag}");
    let with_value = format!("{long}=");
    typed
        .iter()
        .skip(1)
        .map(|a| a.to_string_lossy())
        .take_while(|a| a != "--")
        .any(|a| a == long || a.starts_with(&with_value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{Arg, Command};

    fn command() -> Command {
        Command::new("t")
            .arg(
                Arg::new("port")
                    .long("port")
                    .env("PYRUN_TEST_ORIGIN_PORT")
                    .value_parser(clap::value_parser!(u16)),
            )
            .arg(
                Arg::new("index")
                    .long("index")
                    .env("PYRUN_TEST_ORIGIN_INDEX")
                    .value_parser(|v: &str| -> Result<String, String> {
                        Err(format!("'{v}' is not an index"))
                    }),
            )
            .arg(
                Arg::new("secret")
                    .long("secret")
                    .env("PYRUN_TEST_ORIGIN_SECRET")
                    .hide_env_values(true)
                    .value_parser(clap::value_parser!(u16)),
            )
    }

    fn error_for(args: &[&str]) -> clap::Error {
        command().try_get_matches_from(args).unwrap_err()
    }

    fn typed(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn a_second_stage_message_names_the_variable_only_when_no_flag_was_typed() {
        let variable = "PYRUN_TEST_ORIGIN_PORT";
        let from_dotenv = vec![(variable.to_owned(), Some(2))];
        let message = "--port 'x' is not a port";
        let typed_flag = Origins::new(typed(&["t", "--port=x"]), from_dotenv.clone());
        assert_eq!(typed_flag.reword(message, &command()), None);
        // Unset in the environment: the value was the flag's default, not the variable's.
        let origins = Origins::new(typed(&["t"]), from_dotenv);
        assert_eq!(origins.reword(message, &command()), None);
        assert_eq!(origins.reword("no flag here", &command()), None);
    }

    #[test]
    fn a_secret_value_is_never_repeated() {
        let error = error_for(&["t", "--secret=hunter2"]);
        let said = explain(error, &command(), &typed(&["t"]), |_| None)
            .unwrap()
            .to_string();
        assert!(said.contains("PYRUN_TEST_ORIGIN_SECRET"), "{said}");
        assert!(said.contains("the environment"), "{said}");
        assert!(!said.contains("hunter2"), "{said}");
    }

    #[test]
    fn a_url_with_a_password_is_never_repeated_whatever_the_setting() {
        let url = "https://u:hunter2@index.example/simple";
        let error = error_for(&["t", &format!("--index={url}")]);
        let said = explain(error, &command(), &typed(&["t"]), |_| None)
            .unwrap()
            .to_string();
        assert!(said.contains("PYRUN_TEST_ORIGIN_INDEX"), "{said}");
        assert!(!said.contains("hunter2"), "{said}");
    }

    #[test]
    fn a_typed_flag_keeps_the_flag_and_dotenv_names_its_line() {
        let error = error_for(&["t", "--port", "x"]);
        assert!(explain(error, &command(), &typed(&["t", "--port", "x"]), |_| None).is_err());
        let error = error_for(&["t", "--port", "x"]);
        let said = explain(error, &command(), &typed(&["t"]), |_| Some(Some(4)))
            .unwrap()
            .to_string();
        assert!(
            said.starts_with(
                "PYRUN_TEST_ORIGIN_PORT, set in .env line 4, has the invalid value 'x'"
            ),
            "{said}"
        );
    }
}
