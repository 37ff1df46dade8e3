//! One module per subcommand; each returns data for `output` to print and never prints itself.
//! (The interactive menu, whose job is the conversation, is the driver `crate::interactive`.)

pub mod artifacts;
pub mod call;
pub mod code;
pub mod files;
pub mod packages;
pub mod ping;
pub mod prompts;
pub mod resources;
pub mod run;
pub mod run_arguments;
pub mod runs;
pub mod sessions;
pub mod tools;
