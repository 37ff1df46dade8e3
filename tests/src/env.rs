//! The settings a test server must not inherit: every variable the server reads, from the server's
//! own list (`server/src/config/env_vars.rs`, checked against config.rs by its unit test), so the
//! scrub cannot go stale. A developer's shell may hold any of them (`PYRUN_SANDBOX=off`, a
//! token...).

use std::process::Command;

// The file is not a module of the server crate: included here so the harness starts the binary
// without linking the server.
include!("../../server/src/config/env_vars.rs");

/// Removes every server setting ([`ENV_VARS`]) from `cmd`'s environment; PATH stays.
pub fn scrub_env(cmd: &mut Command) -> &mut Command {
    for name in ENV_VARS {
        cmd.env_remove(name);
    }
    cmd
}
