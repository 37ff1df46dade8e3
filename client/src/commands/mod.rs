//! One module per subcommand; each returns data for `output` to print and never prints itself
//! (except the interactive menu, whose job is the conversation).

pub mod call;
pub mod files;
pub mod interactive;
pub mod ping;
pub mod run;
pub mod tools;
