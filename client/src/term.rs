//! Unbuffered writes to stdout and stderr, shared by `output` and `reporter`: a closed pipe
//! (`| head`) is not an error worth reporting, so write failures are ignored.

use std::io::Write;

pub fn write_stdout(text: &str) {
    write_stdout_bytes(text.as_bytes());
}

/// Bytes as they are (a binary resource piped on).
pub fn write_stdout_bytes(bytes: &[u8]) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(bytes);
    let _ = out.flush();
}

pub fn write_stderr(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes());
    let _ = err.flush();
}
