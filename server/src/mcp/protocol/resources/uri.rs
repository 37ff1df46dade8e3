//! What a resource URI names, read once: `resources/read` parses the URI into a
//! [`ResourceUri`] and goes straight to the module that serves its kind (the projects folder's
//! files, a run's files and output, the server's MCP App), instead of offering the URI to one
//! reader after another.

use percent_encoding::percent_decode_str;

use crate::mcp::present::artifact_blocks::{FILES_SEGMENT, RUNS_PREFIX};
use crate::mcp::present::output_cut::parse_output_uri;
use crate::mcp::protocol::apps::UI_SCHEME;
use crate::mcp::protocol::resources::project_files::PROJECTS_PREFIX;
use pyrun_run::artifacts::is_run_id;
use pyrun_run::live_output::Stream;

/// The kinds of resource this server serves, and what a URI of each kind carries.
#[derive(Debug, PartialEq, Eq)]
pub enum ResourceUri<'a> {
    /// `pyrun://projects/{path}`: a file of the projects folder, its path still percent-encoded
    /// (its read decodes and proves it, naming the URI in any refusal).
    ProjectFile { encoded: &'a str },
    /// `pyrun://runs/{run_id}/stdout` or `/stderr`: a run's whole captured output.
    RunOutput { run_id: &'a str, stream: Stream },
    /// `pyrun://runs/{run_id}/files/{name}`: a file a run left, its name decoded.
    RunArtifact { run_id: &'a str, name: String },
    /// Under `pyrun://runs/` but neither of the above: no run resource.
    NoRunResource,
    /// `ui://…`: an MCP App of the server.
    App,
    /// Anything else.
    Unknown,
}

impl<'a> ResourceUri<'a> {
    /// The kind of `uri`, by its prefix first, then its shape.
    pub fn parse(uri: &'a str) -> Self {
        if uri.starts_with(UI_SCHEME) {
            return Self::App;
        }
        if let Some(encoded) = uri.strip_prefix(PROJECTS_PREFIX) {
            return Self::ProjectFile { encoded };
        }
        if !uri.starts_with(RUNS_PREFIX) {
            return Self::Unknown;
        }
        if let Some((run_id, stream)) = parse_output_uri(uri) {
            return Self::RunOutput { run_id, stream };
        }
        match parse_artifact_uri(uri) {
            Some((run_id, name)) => Self::RunArtifact { run_id, name },
            None => Self::NoRunResource,
        }
    }
}

/// The run id and artifact name of a run URI; `None` for anything else (also a name that does
/// not decode to UTF-8).
fn parse_artifact_uri(uri: &str) -> Option<(&str, String)> {
    let rest = uri.strip_prefix(RUNS_PREFIX)?;
    let (run_id, encoded) = rest.split_once(FILES_SEGMENT)?;
    if !is_run_id(run_id) || encoded.is_empty() {
        return None;
    }
    // A `%` must start an escape (the decoder would keep a stray one as it is).
    let escapes_ok = encoded
        .split('%')
        .skip(1)
        .all(|after| after.len() >= 2 && after.as_bytes()[..2].iter().all(u8::is_ascii_hexdigit));
    if !escapes_ok {
        return None;
    }
    let name = percent_decode_str(encoded).decode_utf8().ok()?;
    Some((run_id, name.into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::present::artifact_blocks::artifact_uri;
    use crate::mcp::present::output_cut::output_uri;

    #[test]
    fn artifact_uris_encode_each_segment_and_decode_back() {
        let run = format!("run_{}", "ab".repeat(16));
        let uri = artifact_uri(&run, "plots/a b%ü~.png");
        assert_eq!(
            uri,
            format!("pyrun://runs/{run}/files/plots/a%20b%25%C3%BC~.png")
        );
        assert_eq!(
            parse_artifact_uri(&uri),
            Some((run.as_str(), "plots/a b%ü~.png".to_owned()))
        );
        // Names that look like paths out stay names: they are only looked up, never opened.
        let dots = artifact_uri(&run, "..");
        assert_eq!(
            parse_artifact_uri(&dots).map(|(_, n)| n),
            Some("..".to_owned())
        );
        for bad in [
            "pyrun://runs/run_x/files/a.png".to_owned(),
            format!("pyrun://runs/{run}/files/"),
            format!("pyrun://runs/{run}/files/%zz"),
            format!("pyrun://runs/{run}/files/%ff"),
            format!("pyrun://runs/{run}/other/a.png"),
            format!("pyrun://projects/{run}/files/a.png"),
        ] {
            assert_eq!(parse_artifact_uri(&bad), None, "{bad}");
        }
    }

    #[test]
    fn each_uri_has_one_kind() {
        let run = format!("run_{}", "ab".repeat(16));
        let artifact = artifact_uri(&run, "a.png");
        let stderr = output_uri(&run, Stream::Stderr);
        let cases = [
            (
                "pyrun://projects/a%20b.py",
                ResourceUri::ProjectFile {
                    encoded: "a%20b.py",
                },
            ),
            (
                artifact.as_str(),
                ResourceUri::RunArtifact {
                    run_id: &run,
                    name: "a.png".to_owned(),
                },
            ),
            (
                stderr.as_str(),
                ResourceUri::RunOutput {
                    run_id: &run,
                    stream: Stream::Stderr,
                },
            ),
            ("pyrun://runs/nope/files/x.png", ResourceUri::NoRunResource),
            ("ui://pyrun/run.html", ResourceUri::App),
            ("ui://pyrun/other.html", ResourceUri::App),
            ("pyrun://other/x", ResourceUri::Unknown),
            ("file:///etc/passwd", ResourceUri::Unknown),
        ];
        for (uri, kind) in cases {
            assert_eq!(ResourceUri::parse(uri), kind, "{uri}");
        }
    }
}
