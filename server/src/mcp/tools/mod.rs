//! The tool rooms, one per tool family. Each adds its `#[tool]` methods to `PyRunServer` in a
//! `#[tool_router]` of its own, which the handler composes. Rooms never import each other.

mod backend_status;
mod background_runs;
mod file_runs;
mod inline_code;
mod packages;
mod python_sessions;
mod stdin_uploads;
