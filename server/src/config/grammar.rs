//! clap's value parsers for the one grammar of setting values (`pyrun_api::grammar`): a flag, its
//! variable and its `.env` line go through the same parser, so they accept the same spellings,
//! and `origin.rs` says a refused one with the variable and where it was set.

use clap::builder::TypedValueParser;
use pyrun_api::grammar;

/// A MiB, the unit of the `…_MB` settings.
pub(super) const MIB: u64 = 1 << 20;

/// `1, true, yes, on` or `0, false, no, off`. A boolean flag takes it after `=`
/// (`--allow-network=0`); alone it means on (see [`FLAG`]).
pub(super) fn boolean() -> impl TypedValueParser<Value = bool> {
    |text: &str| grammar::boolean(text)
}

/// A whole number in `min..=max`.
pub(super) fn count(min: u64, max: u64) -> impl TypedValueParser<Value = u64> {
    move |text: &str| grammar::count(text, min, max)
}

/// A size in bytes, `min..=max` of them: `65536`, `64k`, `1.5M`.
pub(super) fn bytes(min: u64, max: u64) -> impl TypedValueParser<Value = u64> {
    move |text: &str| grammar::size(text, 1, min, max)
}

/// A size in MiB, `min..=max` of them: `2048`, `2G`, `512MiB`.
pub(super) fn mebibytes(min: u64, max: u64) -> impl TypedValueParser<Value = u64> {
    move |text: &str| grammar::size(text, MIB, min, max)
}

/// A duration in whole seconds, `min..=max` of them: `30`, `90s`, `5m`, `1h30m`.
pub(super) fn seconds(min: u64, max: u64) -> impl TypedValueParser<Value = u64> {
    move |text: &str| grammar::seconds(text, min, max)
}

#[cfg(test)]
mod tests {
    use super::super::Cli;

    /// What a setting's value is.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Kind {
        Bool,
        Count,
        Bytes,
        Mebibytes,
        Seconds,
        /// One of a few words (clap lists them).
        Choice,
        /// A path, a URL, a name, a list or a secret: text the setting itself checks.
        Text,
    }
    use Kind::*;

    /// Every setting with a variable, and its kind.
    const SETTINGS: &[(&str, Kind)] = &[
        ("MCP_TRANSPORT", Choice),
        ("PYTHON_PROJECTS_DIR", Text),
        ("PYTHON_TIMEOUT", Seconds),
        ("PYTHON_BIN", Text),
        ("PYRUN_MAX_OUTPUT_BYTES", Bytes),
        ("PYRUN_MAX_RESULT_OUTPUT_BYTES", Bytes),
        ("PYRUN_MAX_STDIN_BYTES", Bytes),
        ("PYRUN_MAX_CONCURRENT", Count),
        ("PYRUN_PASS_ENV", Text),
        ("PYRUN_ALLOW_BROAD_PROJECTS_DIR", Bool),
        ("PYRUN_BACKGROUND_TIMEOUT", Seconds),
        ("PYRUN_MAX_BACKGROUND_CONCURRENT", Count),
        ("PYRUN_MAX_BACKGROUND_RUNS", Count),
        ("PYRUN_MAX_BACKGROUND_RUNS_PER_CALLER", Count),
        ("PYRUN_RUN_RETENTION", Seconds),
        ("PYRUN_DETACH_AFTER", Seconds),
        ("PYRUN_SANDBOX", Choice),
        ("PYRUN_ALLOW_NETWORK", Bool),
        ("PYRUN_READ_ONLY_PROJECTS", Bool),
        ("PYRUN_WRITE_SCOPE", Choice),
        ("PYRUN_ALLOW_PROTECTED_WRITES", Bool),
        ("PYRUN_MAX_MEMORY_MB", Mebibytes),
        ("PYRUN_MAX_CPU_SECS", Seconds),
        ("PYRUN_MAX_FILE_SIZE_MB", Mebibytes),
        ("PYRUN_MAX_OPEN_FILES", Count),
        ("PYRUN_MAX_PROCESSES", Count),
        ("MCP_BIND", Text),
        ("MCP_AUTH_TOKEN", Text),
        ("MCP_ALLOWED_HOSTS", Text),
        ("MCP_ALLOW_UNAUTHENTICATED", Bool),
        ("MCP_MAX_SESSIONS", Count),
        ("MCP_MAX_SESSIONS_PER_CALLER", Count),
        ("MCP_SESSION_IDLE_TIMEOUT", Seconds),
        ("MCP_MAX_BODY_BYTES", Bytes),
        ("MCP_BODY_TIMEOUT", Seconds),
        ("MCP_MAX_CONNECTIONS", Count),
        ("MCP_MAX_UNAUTHENTICATED_PER_ADDRESS", Count),
        ("MCP_TUNNEL", Choice),
        ("NGROK_AUTHTOKEN", Text),
        ("MCP_TUNNEL_DOMAIN", Text),
        ("MCP_URL_FILE", Text),
        ("NGROK_SERVER_ADDR", Text),
        ("MCP_OAUTH", Bool),
        ("MCP_PUBLIC_URL", Text),
        ("MCP_OAUTH_OWNER_PASSWORD", Text),
        ("PYRUN_STATE_DIR", Text),
        ("PYRUN_AUDIT_LOG", Text),
        ("PYRUN_OAUTH_TEST_METADATA_CA", Text),
        ("PYRUN_MAX_INLINE_IMAGE_BYTES", Bytes),
        ("PYRUN_MAX_INLINE_IMAGE_EDGE", Count),
        ("PYRUN_MAX_ARTIFACT_STORAGE_MB", Mebibytes),
        ("PYRUN_MAX_ARTIFACT_STORAGE_PER_CALLER_MB", Mebibytes),
        ("PYRUN_ALLOW_INLINE_CODE", Bool),
        ("PYRUN_MAX_CODE_BYTES", Bytes),
        ("PYRUN_ALLOW_INSTALL", Bool),
        ("PYRUN_PACKAGE_INDEX", Text),
        ("PYRUN_ALLOW_SDIST", Bool),
        ("PYRUN_UV", Text),
        ("PYRUN_INSTALL_TIMEOUT", Seconds),
        ("PYRUN_MAX_INSTALL_MB", Mebibytes),
        ("PYRUN_ALLOW_PYTHON", Text),
        ("PYRUN_MAX_PYTHON_SESSIONS", Count),
        ("PYRUN_MAX_PYTHON_SESSIONS_PER_CALLER", Count),
        ("PYRUN_PYTHON_SESSION_IDLE_TIMEOUT", Seconds),
        ("PYRUN_WARM", Bool),
        ("PYRUN_WARM_MAX", Count),
        ("PYRUN_WARM_IDLE", Seconds),
        ("PYRUN_PRELOAD", Text),
        ("PYRUN_RUNPOD_ENDPOINT", Text),
        ("PYRUN_RUNPOD_API_URL", Text),
        ("PYRUN_RUNPOD_POLL", Choice),
    ];

    /// What each kind accepts (with the value it reads) and refuses, whatever the setting's range.
    fn samples(kind: Kind) -> (Vec<(&'static str, &'static str)>, Vec<&'static str>) {
        match kind {
            Bool => (
                vec![
                    ("1", "true"),
                    ("yes", "true"),
                    ("On", "true"),
                    ("TRUE", "true"),
                    ("0", "false"),
                    ("no", "false"),
                    ("off", "false"),
                    ("False", "false"),
                ],
                vec!["maybe", "2", "enabled", ""],
            ),
            Count => (vec![("64", "64")], vec!["lots", "1.5", "8k", "-1"]),
            Bytes => (
                vec![("1k", "1024"), ("2048", "2048"), ("2KiB", "2048")],
                vec!["lots", "1x", "-1", "1.5"],
            ),
            Mebibytes => (
                vec![("1G", "1024"), ("512", "512"), ("1.5gib", "1536")],
                vec!["lots", "1k", "1x"],
            ),
            Seconds => (
                vec![("1m", "60"), ("45", "45"), ("1m30s", "90")],
                vec!["soon", "1.5", "-5", "1h30"],
            ),
            Choice | Text => (Vec::new(), Vec::new()),
        }
    }

    /// The value `flag=value` gives, as text, or clap's refusal.
    fn parsed(id: &str, flag: &str, value: &str) -> Result<String, String> {
        let given = format!("--{flag}={value}");
        let matches = Cli::command_line()
            .try_get_matches_from(["pyrun-mcp-server", given.as_str()])
            .map_err(|e| e.to_string())?;
        if let Ok(Some(value)) = matches.try_get_one::<bool>(id) {
            return Ok(value.to_string());
        }
        match matches.try_get_one::<u64>(id) {
            Ok(Some(value)) => Ok(value.to_string()),
            other => panic!("{flag}: not a bool nor a number: {other:?}"),
        }
    }

    #[test]
    fn every_setting_reads_the_one_grammar_of_its_kind() {
        let command = Cli::command_line();
        let mut seen = Vec::new();
        for arg in command.get_arguments() {
            let Some(variable) = arg.get_env().and_then(|v| v.to_str()) else {
                continue;
            };
            let Some(&(_, kind)) = SETTINGS.iter().find(|(name, _)| *name == variable) else {
                panic!("{variable} has no row in SETTINGS: say what kind of value it takes");
            };
            seen.push(variable.to_owned());
            let id = arg.get_id().as_str();
            let flag = arg
                .get_long()
                .unwrap_or_else(|| panic!("{variable}: no flag"));
            let (accepted, refused) = samples(kind);
            for (value, reads) in accepted {
                assert_eq!(
                    parsed(id, flag, value).as_deref(),
                    Ok(reads),
                    "--{flag}={value}"
                );
            }
            for value in refused {
                let said = parsed(id, flag, value).expect_err(&format!("--{flag}={value}"));
                assert!(said.contains(&format!("--{flag}")), "{said}");
                let expected = match kind {
                    Bool => "1, true, yes, on",
                    Count => "whole number",
                    Bytes | Mebibytes => "size",
                    Seconds => "duration",
                    Choice | Text => unreachable!(),
                };
                // A value out of the grammar says what was expected; a whole one in the wrong
                // place (`1.5` seconds, `1k` MiB) says why.
                assert!(
                    said.contains(expected) || said.contains("is not a whole number"),
                    "--{flag}={value}: {said}"
                );
            }
            // A boolean flag alone is on (`--warm` takes its value always).
            if kind == Bool && flag != "warm" {
                let matches = Cli::command_line()
                    .try_get_matches_from(["pyrun-mcp-server", &format!("--{flag}")])
                    .unwrap();
                assert_eq!(matches.get_one::<bool>(id), Some(&true), "--{flag}");
            }
        }
        for (name, _) in SETTINGS {
            assert!(
                seen.iter().any(|s| s == name),
                "{name} in SETTINGS is no setting"
            );
        }
    }
}
