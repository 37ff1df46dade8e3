//! The resources room: the projects folder as MCP resources: `resources/list` (paged with an opaque cursor), the
//! template `pyrun://projects/{+path}` and `resources/read`, each file proven by
//! `run::paths` ([`ProjectRoot::resolve_file`](crate::run::paths::ProjectRoot::resolve_file))
//! exactly as `run_python` proves a script; `watch` tells sessions when files appear or go.
//!
//! A URI names a file by its path relative to the folder, each `/`-separated segment
//! percent-encoded (RFC 3986 unreserved characters kept). Reading decodes it and hands the text to
//! the same proof as a `file_name`, so `..`, absolute paths, links out and sibling prefixes get the
//! same refusals; hidden and protected names get theirs. Text comes back as text, anything else as
//! a base64 blob, up to [`MAX_RESOURCE_BYTES`].

pub mod watch;

use std::sync::Arc;

use base64::Engine as _;
use percent_encoding::percent_decode_str;
use rmcp::model::{
    ListResourceTemplatesResult, ListResourcesResult, PaginatedRequestParams, ReadResourceResult,
    Resource, ResourceContents, ResourceTemplate,
};
use rmcp::ErrorData;

use super::client_message::ClientMessage;
use super::reply::encode_segments;
use crate::app::App;
use crate::run::paths::{PathError, ProjectFile, ProjectRoot, ReadError};

/// Where project files live in the URI space.
pub const PROJECTS_PREFIX: &str = "pyrun://projects/";
/// The template clients may fill in.
pub const PROJECTS_TEMPLATE: &str = "pyrun://projects/{+path}";
/// Resources per `resources/list` page.
pub const PAGE_SIZE: usize = 100;
/// The largest file `resources/read` returns (its base64 form is a third larger).
pub const MAX_RESOURCE_BYTES: u64 = 8 * 1024 * 1024;

/// The URI of a project file, from its path relative to the folder.
pub fn project_uri(relative: &str) -> String {
    format!("{PROJECTS_PREFIX}{}", encode_segments(relative))
}

/// One page of the served files, after the cursor's file.
pub async fn list(
    app: &Arc<App>,
    request: Option<PaginatedRequestParams>,
) -> Result<ListResourcesResult, ErrorData> {
    let after = match request.and_then(|r| r.cursor) {
        Some(cursor) => Some(decode_cursor(&cursor).ok_or_else(|| {
            ErrorData::invalid_params(
                ClientMessage::new("the cursor is not one this server gave")
                    .hint("start again without a cursor")
                    .into_string(),
                None,
            )
        })?),
        None => None,
    };
    let app = app.clone();
    let fresh = after.is_none();
    let files = tokio::task::spawn_blocking(move || app.watch.listing(fresh))
        .await
        .unwrap_or_default();
    let start = match &after {
        Some(after) => files.partition_point(|f| f.relative.as_str() <= after.as_str()),
        None => 0,
    };
    let page = files.get(start..).unwrap_or_default();
    let more = page.len() > PAGE_SIZE;
    let page = &page[..page.len().min(PAGE_SIZE)];
    let resources = page
        .iter()
        .map(|file| {
            Resource::new(project_uri(&file.relative), file.relative.clone())
                .with_mime_type(mime_type(&file.relative))
                .with_size(file.size)
        })
        .collect();
    let mut result = ListResourcesResult::with_all_items(resources);
    if more {
        result.next_cursor = page.last().map(|f| encode_cursor(&f.relative));
    }
    Ok(result)
}

/// The one template: any project file by its path.
pub fn templates() -> ListResourceTemplatesResult {
    let template = ResourceTemplate::new(PROJECTS_TEMPLATE, "project-file")
        .with_title("A file of the projects folder")
        .with_description(
            "Any file of the projects folder by its path relative to the folder (hidden and \
             protected files excepted).",
        );
    ListResourceTemplatesResult::with_all_items(vec![template])
}

/// `resources/read` of a `pyrun://projects/...` URI.
pub async fn read(app: &Arc<App>, uri: &str) -> Result<ReadResourceResult, ErrorData> {
    let Some(encoded) = uri.strip_prefix(PROJECTS_PREFIX) else {
        return Err(not_found(uri));
    };
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
    let read = read_served(app, move |root| {
        root.resolve_file(&path).map_err(Refused::Path)
    })
    .await?;
    let (file, bytes) = read.map_err(|refused| match refused {
        Refused::Path(e) => Refused::Path(naming(e, uri)).into_error(uri),
        read => read.into_error(uri),
    })?;
    Ok(ReadResourceResult::new(vec![contents(uri, &file, bytes)]))
}

/// Proves a file with `resolve` and reads it (at most [`MAX_RESOURCE_BYTES`]), off the async
/// threads: the one read path of resources and prompts.
pub(crate) async fn read_served(
    app: &Arc<App>,
    resolve: impl FnOnce(&ProjectRoot) -> Result<ProjectFile, Refused> + Send + 'static,
) -> Result<Result<(ProjectFile, Vec<u8>), Refused>, ErrorData> {
    let app = app.clone();
    tokio::task::spawn_blocking(move || {
        let file = resolve(&app.root)?;
        let bytes = app
            .root
            .read_file(&file, MAX_RESOURCE_BYTES)
            .map_err(Refused::Read)?;
        Ok((file, bytes))
    })
    .await
    .map_err(|_| ErrorData::internal_error("the read did not finish", None))
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

use crate::run::mime::OCTET_STREAM;
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
    crate::run::mime::by_name(relative)
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

fn encode_cursor(relative: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("after:{relative}"))
}

fn decode_cursor(cursor: &str) -> Option<String> {
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(cursor)
        .ok()?;
    String::from_utf8(bytes)
        .ok()?
        .strip_prefix("after:")
        .map(str::to_owned)
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
    fn a_cursor_round_trips_and_a_forged_one_is_refused() {
        assert_eq!(
            decode_cursor(&encode_cursor("x/y z.py")).as_deref(),
            Some("x/y z.py")
        );
        assert_eq!(decode_cursor("not base64 !"), None);
        assert_eq!(decode_cursor("eHl6"), None); // "xyz": no marker
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
