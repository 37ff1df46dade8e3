//! A file of the projects folder as MCP shows it (shared by the resources and prompts rooms): its
//! `pyrun://projects/…` URI, its proven read (at most [`MAX_RESOURCE_BYTES`]), its contents —
//! text when it is UTF-8 text, a base64 blob otherwise — and the errors a client gets instead.

use std::sync::Arc;

use base64::Engine as _;
use percent_encoding::percent_decode_str;
use rmcp::model::{ReadResourceResult, ResourceContents};
use rmcp::ErrorData;

use crate::app::App;
use crate::client_message::ClientMessage;
use crate::mcp::present::reply::encode_segments;
use crate::mcp::protocol::resources::read_budget::{ReadBudget, ReadShare};
use pyrun_run::caller::Caller;
use pyrun_run::mime::OCTET_STREAM;
use pyrun_run::paths::{PathError, ProjectFile, ProjectRoot, ReadError};

/// Where project files live in the URI space.
pub const PROJECTS_PREFIX: &str = "pyrun://projects/";
/// The largest file `resources/read` returns (its base64 form is a third larger).
pub const MAX_RESOURCE_BYTES: u64 = 8 * 1024 * 1024;

/// The URI of a project file, from its path relative to the folder.
pub fn project_uri(relative: &str) -> String {
    format!("{PROJECTS_PREFIX}{}", encode_segments(relative))
}

/// Proves a file with `resolve` and reads it (at most [`MAX_RESOURCE_BYTES`]), off the async
/// threads, once `budget` has room for its size: the one read path of resources and prompts.
/// The share comes back with the bytes; keep it until the answer is built.
pub(crate) async fn read_served(
    app: &Arc<App>,
    budget: &ReadBudget,
    caller: &Caller,
    resolve: impl FnOnce(&ProjectRoot) -> Result<ProjectFile, Refused> + Send + 'static,
) -> Result<Result<(ProjectFile, Vec<u8>, ReadShare), Refused>, ErrorData> {
    let unfinished = |_| ErrorData::internal_error("the read did not finish", None);
    let proving = app.clone();
    let file = match tokio::task::spawn_blocking(move || resolve(proving.engine.root()))
        .await
        .map_err(unfinished)?
    {
        Ok(file) => file,
        Err(refused) => return Ok(Err(refused)),
    };
    let share = budget
        .take(&caller.key(), file.size().min(MAX_RESOURCE_BYTES))
        .await?;
    let app = app.clone();
    tokio::task::spawn_blocking(move || {
        let bytes = app
            .engine
            .root()
            .read_file(&file, MAX_RESOURCE_BYTES)
            .map_err(Refused::Read)?;
        Ok((file, bytes, share))
    })
    .await
    .map_err(unfinished)
}

/// A file's contents: text when it is UTF-8 (and not of a binary type), a blob otherwise.
pub fn contents(uri: &str, file: &ProjectFile, bytes: Vec<u8>) -> ResourceContents {
    let mime = mime_type(file.relative());
    let binary_type = !(mime.starts_with("text/") || TEXT_APPLICATION.contains(&mime));
    let known = mime != OCTET_STREAM;
    let bytes = if binary_type && known {
        bytes
    } else {
        match String::from_utf8(bytes) {
            Ok(text) => {
                let mime = if known { mime } else { "text/plain" };
                return ResourceContents::text(text, uri).with_mime_type(mime);
            }
            Err(not_text) => not_text.into_bytes(),
        }
    };
    let blob = base64::engine::general_purpose::STANDARD.encode(&bytes);
    ResourceContents::blob(blob, uri).with_mime_type(mime)
}

/// `application/*` types that are text.
const TEXT_APPLICATION: &[&str] = &[
    "application/json",
    "application/toml",
    "application/yaml",
    "application/xml",
    "application/javascript",
    "application/x-ipynb+json",
];

/// The MIME type of a file, by its extension (the run layer's one table).
pub fn mime_type(relative: &str) -> &'static str {
    pyrun_run::mime::by_name(relative)
}

/// Why a read was refused, before it becomes the client's error.
pub(crate) enum Refused {
    Path(PathError),
    Read(ReadError),
}

impl Refused {
    /// The JSON-RPC error a client sees: a missing file is "resource not found" (-32002), any
    /// other refusal an invalid parameter naming what is wrong; never a host path.
    pub(crate) fn into_error(self, uri: &str) -> ErrorData {
        match self {
            Refused::Path(PathError::NotFound(_)) => not_found(uri),
            Refused::Path(PathError::Directory(given)) => ErrorData::invalid_params(
                ClientMessage::quoting(&given)
                    .then(" is a folder; read a file in it")
                    .into_string(),
                None,
            ),
            Refused::Path(e) => {
                ErrorData::invalid_params(ClientMessage::from(e).into_string(), None)
            }
            Refused::Read(ReadError::TooLarge { size, cap }) => ErrorData::invalid_params(
                ClientMessage::quoting(uri)
                    .then(" has ")
                    .number(size)
                    .then(" bytes, more than the ")
                    .number(cap)
                    .then(" bytes (")
                    .number(cap / (1024 * 1024))
                    .then(" MiB) a resource may have")
                    .hint("run a script that prints the part you need")
                    .into_string(),
                None,
            ),
            Refused::Read(ReadError::Changed) => ErrorData::invalid_params(
                ClientMessage::quoting(uri)
                    .then(" changed while it was read (replaced by a link or removed)")
                    .into_string(),
                None,
            ),
            Refused::Read(ReadError::Io(kind)) => {
                tracing::warn!(%uri, ?kind, "a project file could not be read");
                ErrorData::internal_error(
                    ClientMessage::quoting(uri)
                        .then(" could not be read")
                        .kind(kind)
                        .into_string(),
                    None,
                )
            }
        }
    }
}

pub(crate) fn not_found(uri: &str) -> ErrorData {
    ErrorData::resource_not_found(
        ClientMessage::new("no resource ")
            .given(uri)
            .hint("resources/list names the project files; their URIs start with pyrun://projects/")
            .into_string(),
        None,
    )
}

/// `resources/read` of a `pyrun://projects/{encoded}` URI: the path decoded and proven as a
/// `file_name` is, so `..`, absolute paths, links out and sibling prefixes get the same
/// refusals (naming the URI), then read; with its share of the read budget (keep it until the
/// answer is written).
pub async fn read_resource(
    app: &Arc<App>,
    budget: &ReadBudget,
    caller: &Caller,
    uri: &str,
    encoded: &str,
) -> Result<(ReadResourceResult, ReadShare), ErrorData> {
    let path = percent_decode_str(encoded)
        .decode_utf8()
        .map_err(|_| {
            ErrorData::invalid_params(
                ClientMessage::quoting(uri)
                    .then(" does not decode to a UTF-8 path")
                    .into_string(),
                None,
            )
        })?
        .into_owned();
    let read = read_served(app, budget, caller, move |root| {
        root.resolve_file(&path).map_err(Refused::Path)
    })
    .await?;
    let (file, bytes, share) = read.map_err(|refused| match refused {
        Refused::Path(e) => Refused::Path(naming(e, uri)).into_error(uri),
        read => read.into_error(uri),
    })?;
    Ok((
        ReadResourceResult::new(vec![contents(uri, &file, bytes)]),
        share,
    ))
}

/// The same refusal, naming the URI the caller sent rather than the path it decodes to.
fn naming(e: PathError, uri: &str) -> PathError {
    let uri = uri.to_owned();
    match e {
        PathError::Outside(_) => PathError::Outside(uri),
        PathError::NotFound(_) => PathError::NotFound(uri),
        PathError::Directory(_) => PathError::Directory(uri),
        PathError::NotRegularFile(_) => PathError::NotRegularFile(uri),
        PathError::NotPython(_) => PathError::NotPython(uri),
        PathError::TooManyLinks(_) => PathError::TooManyLinks(uri),
        PathError::Unreadable(_) => PathError::Unreadable(uri),
        PathError::NotServed(_) => PathError::NotServed(uri),
        other @ (PathError::Empty
        | PathError::NulByte
        | PathError::TooLong
        | PathError::BadRoot(_)) => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_encode_each_segment_and_keep_unreserved_characters() {
        assert_eq!(project_uri("a/b.py"), "pyrun://projects/a/b.py");
        assert_eq!(
            project_uri("my dir/naïve ~x_-.py"),
            "pyrun://projects/my%20dir/na%C3%AFve%20~x_-.py"
        );
        assert_eq!(project_uri("a%2F.py"), "pyrun://projects/a%252F.py");
        assert_eq!(project_uri("q?#.py"), "pyrun://projects/q%3F%23.py");
    }

    #[test]
    fn mime_types_follow_the_extension() {
        assert_eq!(mime_type("a/b.py"), "text/x-python");
        assert_eq!(mime_type("plot.PNG"), "image/png");
        assert_eq!(mime_type("data.csv"), "text/csv");
        assert_eq!(mime_type("Makefile"), OCTET_STREAM);
        assert_eq!(mime_type("dir.v2/README"), OCTET_STREAM);
    }
}
