//! Inline code (`run_python_code`): off unless the operator turns it on, since it lets a caller
//! run code that is not a file of the projects folder; and the most code one call may send.

/// Largest `--max-code-bytes`: 4 MiB (a call's body carries it, JSON-escaped).
const MAX_CODE_BYTES: u64 = 4 << 20;

/// The flags, as given.
#[derive(Debug, clap::Args)]
#[command(next_help_heading = "Inline code")]
pub struct InlineArgs {
    /// Offer the tool run_python_code: Python code sent in the call runs from the run's private
    /// scratch, under every limit and sandbox layer of run_python [default: off; the tool is not
    /// listed].
    #[arg(long, env = "PYRUN_ALLOW_INLINE_CODE")]
    pub allow_inline_code: bool,

    /// The most code one run_python_code call may send, in bytes (UTF-8).
    #[arg(long, env = "PYRUN_MAX_CODE_BYTES", default_value_t = 256 << 10, value_parser = super::grammar::bytes(1, MAX_CODE_BYTES))]
    pub max_code_bytes: u64,
}

/// The settings, resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineConfig {
    /// Whether `run_python_code` is offered at all.
    pub allowed: bool,
    pub max_code_bytes: usize,
}

impl InlineArgs {
    pub(super) fn resolve(&self) -> InlineConfig {
        InlineConfig {
            allowed: self.allow_inline_code,
            max_code_bytes: usize::try_from(self.max_code_bytes).unwrap_or(usize::MAX),
        }
    }
}
