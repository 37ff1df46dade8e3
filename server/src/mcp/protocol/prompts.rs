//! The prompts room: `run-and-explain {file}`, `debug-script {file, args?}`,
//! `write-tests {file}`. Each proves `file` as `run_python` does (a runnable `.py` file, not hidden
//! or protected), embeds its source as an embedded resource with its `pyrun://projects/...` URI
//! (read through `project_files`), and says what the assistant should do. A bad argument is a JSON-RPC invalid-params error naming it.

use std::sync::Arc;

use rmcp::model::{
    ContentBlock, GetPromptRequestParams, GetPromptResult, JsonObject, ListPromptsResult, Prompt,
    PromptArgument, PromptMessage, Role,
};
use rmcp::ErrorData;
use serde_json::Value;

use crate::app::App;
use crate::client_message::{push_escaped, ClientMessage};
use crate::mcp::protocol::resources::project_files::{self, Refused};
use crate::mcp::protocol::resources::read_budget::ReadBudget;
use pyrun_run::caller::Caller;

/// The prompts' names, in the order `prompts/list` gives them.
pub const NAMES: [&str; 3] = ["run-and-explain", "debug-script", "write-tests"];

pub fn list() -> ListPromptsResult {
    let file = || {
        PromptArgument::new("file")
            .with_description(
                "Path of the .py file, relative to the projects folder (e.g. mathpkg/main.py)",
            )
            .with_required(true)
    };
    let prompts = vec![
        Prompt::new(
            NAMES[0],
            Some(
                "Run a script of the projects folder and explain what it does and what it printed",
            ),
            Some(vec![file()]),
        )
        .with_title("Run and explain a script"),
        Prompt::new(
            NAMES[1],
            Some("Run a failing script, find the cause and propose a fix"),
            Some(vec![
                file(),
                PromptArgument::new("args")
                    .with_description("Command-line arguments to run it with, as one line")
                    .with_required(false),
            ]),
        )
        .with_title("Debug a script"),
        Prompt::new(
            NAMES[2],
            Some("Write pytest tests for a script of the projects folder"),
            Some(vec![file()]),
        )
        .with_title("Write tests for a script"),
    ];
    ListPromptsResult::with_all_items(prompts)
}

pub async fn get(
    app: &Arc<App>,
    budget: &ReadBudget,
    caller: &Caller,
    request: GetPromptRequestParams,
) -> Result<GetPromptResult, ErrorData> {
    let name = request.name.as_str();
    if !NAMES.contains(&name) {
        return Err(ErrorData::invalid_params(
            ClientMessage::new("no prompt ")
                .given(name)
                .hint("the prompts are run-and-explain, debug-script and write-tests")
                .into_string(),
            None,
        ));
    }
    let arguments = request.arguments.unwrap_or_default();
    let file = string_arg(&arguments, "file")?.ok_or_else(|| {
        ErrorData::invalid_params(
            ClientMessage::new("the prompt needs the argument 'file'")
                .hint("name a .py file relative to the projects folder, e.g. hello_world.py")
                .into_string(),
            None,
        )
    })?;
    let args = string_arg(&arguments, "args")?.unwrap_or_default();
    let given = file.clone();
    let read = project_files::read_served(app, budget, caller, move |root| {
        let script = root.resolve_script(&given).map_err(Refused::Path)?;
        root.resolve_file(script.relative())
            .map_err(|_| Refused::Path(pyrun_run::paths::PathError::NotServed(given.clone())))
    })
    .await?;
    let (file, bytes, _share) = read.map_err(|refused| match refused {
        // The script's own words ("not found", "not a Python file"), as `run_python` says them.
        Refused::Path(e) => ErrorData::invalid_params(ClientMessage::from(e).into_string(), None),
        read => read.into_error(&file),
    })?;
    let uri = project_files::project_uri(file.relative());
    let source = project_files::contents(&uri, &file, bytes);
    let mut shown = String::new();
    push_escaped(&mut shown, file.relative());
    let mut args_shown = String::new();
    push_escaped(&mut args_shown, args.trim());
    let task = match name {
        "run-and-explain" => format!(
            "Above is the source of the Python script `{shown}` from the projects folder. Run it \
             with the run_python tool (file_name \"{shown}\"). Then explain what the script does, \
             step by step, and what its output means; point out anything surprising in the \
             output, and explain any error."
        ),
        "debug-script" => {
            let with = if args_shown.is_empty() {
                String::from(" with no arguments")
            } else {
                format!(
                    " with the command-line arguments `{args_shown}` (as run_python's args list)"
                )
            };
            format!(
                "Above is the source of the Python script `{shown}` from the projects folder; it \
                 does not work as expected. Run it with the run_python tool (file_name \
                 \"{shown}\"){with} and read its output and traceback. Find the cause, explain it \
                 plainly, and propose the smallest fix as a diff of the file. If you change the \
                 file, run it again to confirm the fix."
            )
        }
        _ => format!(
            "Above is the source of the Python script `{shown}` from the projects folder. Write \
             pytest tests for it: cover its public functions, typical inputs, edge cases and \
             errors, without network access or files outside the projects folder. Put them in a \
             file named test_<module>.py beside it, and explain what each test checks."
        ),
    };
    let messages = vec![
        PromptMessage::new(Role::User, ContentBlock::resource(source)),
        PromptMessage::new_text(Role::User, task),
    ];
    Ok(GetPromptResult::new(messages).with_description(format!("{name} for {shown}")))
}

/// A string argument, or `None` when absent or null; any other JSON type is refused.
fn string_arg(arguments: &JsonObject, name: &'static str) -> Result<Option<String>, ErrorData> {
    match arguments.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(ErrorData::invalid_params(
            ClientMessage::new("the prompt argument '")
                .then(name)
                .then("' must be a string")
                .into_string(),
            None,
        )),
    }
}
