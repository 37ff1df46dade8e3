//! Names that look like one of the server's settings but are not one (`PYTHON_TIMOUT` for
//! `PYTHON_TIMEOUT`, `pyrun_sandbox`): a setting misspelled in `.env` or the environment would
//! otherwise be ignored without a word and its default used. Only names close to a `PYRUN_*`,
//! `MCP_*` or `PYTHON_*` setting are said; CPython's own variables (`PYTHON_GIL`,
//! `PYTHONPATH`...) and the client's are never.

use super::ENV_VARS;

/// Variables of CPython (3.8 to 3.14) and of the official Python container images: never a
/// misspelled setting of ours, however close (`PYTHON_GIL` is two letters from `PYTHON_BIN`).
const PYTHON_OWN: &[&str] = &[
    "PYTHONASYNCIODEBUG",
    "PYTHONBREAKPOINT",
    "PYTHONCASEOK",
    "PYTHONCOERCECLOCALE",
    "PYTHONDEBUG",
    "PYTHONDEVMODE",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONDUMPREFS",
    "PYTHONDUMPREFSFILE",
    "PYTHONEXECUTABLE",
    "PYTHONFAULTHANDLER",
    "PYTHONHASHSEED",
    "PYTHONHOME",
    "PYTHONINSPECT",
    "PYTHONINTMAXSTRDIGITS",
    "PYTHONIOENCODING",
    "PYTHONLEGACYWINDOWSFSENCODING",
    "PYTHONLEGACYWINDOWSSTDIO",
    "PYTHONMALLOC",
    "PYTHONMALLOCSTATS",
    "PYTHONNODEBUGRANGES",
    "PYTHONNOUSERSITE",
    "PYTHONOPTIMIZE",
    "PYTHONPATH",
    "PYTHONPERFSUPPORT",
    "PYTHONPLATLIBDIR",
    "PYTHONPROFILEIMPORTTIME",
    "PYTHONPYCACHEPREFIX",
    "PYTHONSAFEPATH",
    "PYTHONSTARTUP",
    "PYTHONTHREADDEBUG",
    "PYTHONTRACEMALLOC",
    "PYTHONUNBUFFERED",
    "PYTHONUSERBASE",
    "PYTHONUTF8",
    "PYTHONVERBOSE",
    "PYTHONWARNDEFAULTENCODING",
    "PYTHONWARNINGS",
    "PYTHON_BASIC_REPL",
    "PYTHON_COLORS",
    "PYTHON_CONTEXT_AWARE_WARNINGS",
    "PYTHON_CPU_COUNT",
    "PYTHON_FROZEN_MODULES",
    "PYTHON_GIL",
    "PYTHON_HISTORY",
    "PYTHON_JIT",
    "PYTHON_PERF_JIT_SUPPORT",
    "PYTHON_PRESITE",
    "PYTHON_THREAD_INHERIT_CONTEXT",
    "PYTHON_TLBC",
    // The official container images.
    "PYTHON_VERSION",
    "PYTHON_SHA256",
    "PYTHON_PIP_VERSION",
    "PYTHON_SETUPTOOLS_VERSION",
    "PYTHON_GET_PIP_URL",
    "PYTHON_GET_PIP_SHA256",
];

/// Read by pyrun-mcp-client, which may share the environment or `.env`.
const CLIENT_OWN: &[&str] = &["MCP_SERVER_URL"];

/// The prefixes of the settings a name is compared with.
const PREFIXES: [&str; 3] = ["PYRUN_", "MCP_", "PYTHON_"];

/// A name that is not a setting, the setting it is likely meant to be, and where it was set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookalike {
    pub name: String,
    pub likely: &'static str,
    /// `.env line 3`, `.env` or `the environment`.
    pub source: String,
}

impl std::fmt::Display for Lookalike {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (set in {}) is not a setting of pyrun-mcp-server and is ignored; did you mean {}?",
            self.name, self.source, self.likely
        )
    }
}

/// The setting `name` is likely meant to be, when it is none but close to one: the same letters
/// in another case, or at most one edit away (two for names of ten letters or more; a swap of two
/// neighbours is one).
pub(super) fn likely_setting(name: &str) -> Option<&'static str> {
    if ENV_VARS.contains(&name) || PYTHON_OWN.contains(&name) || CLIENT_OWN.contains(&name) {
        return None;
    }
    let upper = name.to_ascii_uppercase();
    let allowed = if upper.len() >= 10 { 2 } else { 1 };
    ENV_VARS
        .iter()
        .filter(|setting| PREFIXES.iter().any(|p| setting.starts_with(p)))
        .map(|setting| (strsim::osa_distance(&upper, setting), *setting))
        .filter(|(distance, _)| *distance <= allowed)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, setting)| setting)
}

/// The lookalikes among `.env`'s names (with the line of each, when known) and the environment's
/// (`environment`: every name, `.env`'s applied ones among them, said as `.env`'s).
pub(super) fn lookalikes(
    dotenv: &[(String, Option<usize>)],
    environment: impl IntoIterator<Item = String>,
) -> Vec<Lookalike> {
    let from_dotenv = dotenv.iter().map(|(name, line)| {
        let source = line.map_or_else(|| ".env".to_owned(), |line| format!(".env line {line}"));
        (name.clone(), source)
    });
    let from_environment = environment
        .into_iter()
        .filter(|name| !dotenv.iter().any(|(key, _)| key == name))
        .map(|name| (name, "the environment".to_owned()));
    let mut found: Vec<Lookalike> = from_dotenv
        .chain(from_environment)
        .filter_map(|(name, source)| {
            let likely = likely_setting(&name)?;
            Some(Lookalike {
                name,
                likely,
                source,
            })
        })
        .collect();
    found.sort_by(|a, b| a.name.cmp(&b.name));
    found.dedup_by(|a, b| a.name == b.name);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_misspelled_setting_gets_its_likely_name() {
        for (typo, meant) in [
            ("PYTHON_TIMOUT", "PYTHON_TIMEOUT"),
            ("PYTHON_TIMEOTU", "PYTHON_TIMEOUT"),
            ("PYRUN_ALOW_NETWORK", "PYRUN_ALLOW_NETWORK"),
            ("pyrun_sandbox", "PYRUN_SANDBOX"),
            ("MCP_AUTH_TOKN", "MCP_AUTH_TOKEN"),
            ("PYRUN_ALLOW_INLINE", "PYRUN_ALLOW_INLINE_CODE"),
        ] {
            let said = likely_setting(typo);
            if typo == "PYRUN_ALLOW_INLINE" {
                // Five letters short: too far to guess.
                assert_eq!(said, None);
                continue;
            }
            assert_eq!(said, Some(meant), "{typo}");
        }
    }

    #[test]
    fn pythons_own_variables_the_clients_and_the_settings_themselves_are_no_lookalikes() {
        for name in PYTHON_OWN.iter().chain(CLIENT_OWN).chain(ENV_VARS) {
            assert_eq!(likely_setting(name), None, "{name}");
        }
        for other in ["PATH", "HOME", "MCP_TIMEOUT", "PYTHONPATH", "PYENV_VERSION"] {
            assert_eq!(likely_setting(other), None, "{other}");
        }
    }

    #[test]
    fn each_lookalike_is_said_once_with_where_it_was_set() {
        let dotenv = vec![("PYTHON_TIMOUT".to_owned(), Some(2))];
        let environment = ["PYTHON_TIMOUT", "PYTHON_TIMOUT", "PYTHON_TIMOUT"]
            .map(String::from)
            .into_iter()
            .chain(["PYTHON_TIMOUT".to_owned(), "MCP_BIMD".to_owned()]);
        let found = lookalikes(&dotenv, environment);
        assert_eq!(found.len(), 2, "{found:?}");
        assert_eq!(
            found[1].to_string(),
            "PYTHON_TIMOUT (set in .env line 2) is not a setting of pyrun-mcp-server and is \
             ignored; did you mean PYTHON_TIMEOUT?"
        );
        assert_eq!(found[0].likely, "MCP_BIND");
        assert_eq!(found[0].source, "the environment");
    }
}
