//! `files [DIR]`: the Python files the server can run, via `list_python_files`.

use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;

use crate::error::ClientError;
use crate::session::Session;

pub const TOOL: &str = "list_python_files";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileList {
    pub files: Vec<String>,
}

pub async fn execute(session: &Session, dir: Option<&str>) -> Result<FileList, ClientError> {
    let mut arguments = JsonObject::new();
    if let Some(dir) = dir {
        arguments.insert("directory".into(), Value::String(dir.into()));
    }
    let result = session.call_tool(TOOL, arguments).await?;
    if result.is_error == Some(true) {
        return Err(ClientError::tool_failed(TOOL, &result));
    }
    Ok(file_list(&result))
}

/// `structuredContent.files` (strings, or objects with a `path`/`name`), else the text lines.
fn file_list(result: &CallToolResult) -> FileList {
    let structured = result
        .structured_content
        .as_ref()
        .and_then(|s| s.get("files"))
        .and_then(Value::as_array);
    let files = match structured {
        Some(items) => items
            .iter()
            .filter_map(|item| match item {
                Value::String(s) => Some(s.clone()),
                Value::Object(o) => ["path", "name", "file"]
                    .iter()
                    .find_map(|k| o.get(*k).and_then(Value::as_str).map(str::to_owned)),
                _ => None,
            })
            .collect(),
        None => result
            .content
            .iter()
            .filter_map(|c| c.as_text())
            .flat_map(|t| {
                t.text
                    .lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .collect(),
    };
    FileList { files }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::ContentBlock;
    use serde_json::json;

    #[test]
    fn structured_files_win_over_text() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("ignored")]);
        result.structured_content = Some(json!({"files": ["a.py", {"path": "pkg/b.py"}]}));
        assert_eq!(file_list(&result).files, vec!["a.py", "pkg/b.py"]);
    }

    #[test]
    fn text_lines_are_the_fallback() {
        let result = CallToolResult::success(vec![ContentBlock::text("a.py\n\nb.py\n")]);
        assert_eq!(file_list(&result).files, vec!["a.py", "b.py"]);
    }
}
