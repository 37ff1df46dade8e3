//! `prompts` and `prompt NAME [--arg k=v]…`: the server's prompts, and one filled in. Arguments
//! are checked against the prompt's declared list before asking for it.

use rmcp::model::{GetPromptResult, JsonObject, Prompt};
use serde_json::Value;

use crate::error::ClientError;
use crate::session::Session;

pub async fn list(session: &Session) -> Result<Vec<Prompt>, ClientError> {
    session.list_prompts().await
}

pub async fn get(
    session: &Session,
    name: &str,
    pairs: &[String],
) -> Result<GetPromptResult, ClientError> {
    let prompts = session.list_prompts().await?;
    let Some(prompt) = prompts.iter().find(|p| p.name == name) else {
        return Err(ClientError::UnknownPrompt {
            name: name.into(),
            available: prompts.iter().map(|p| p.name.clone()).collect(),
        });
    };
    let arguments = arguments(prompt, pairs)?;
    session.get_prompt(name, arguments).await
}

/// `key=value` pairs as the prompt's (string) arguments: every required one present, no key
/// the prompt does not declare.
pub fn arguments(prompt: &Prompt, pairs: &[String]) -> Result<JsonObject, ClientError> {
    let bad = |reason: String| ClientError::BadPromptArguments {
        prompt: prompt.name.clone(),
        reason,
    };
    let declared = prompt.arguments.as_deref().unwrap_or_default();
    let mut arguments = JsonObject::new();
    for pair in pairs {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| bad(format!("--arg `{pair}` is not of the form key=value")))?;
        if !declared.iter().any(|a| a.name == key) {
            let known: Vec<&str> = declared.iter().map(|a| a.name.as_str()).collect();
            return Err(bad(format!(
                "unknown argument `{key}` (it takes: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        }
        arguments.insert(key.to_owned(), Value::String(value.to_owned()));
    }
    if let Some(missing) = declared
        .iter()
        .find(|a| a.required == Some(true) && !arguments.contains_key(&a.name))
    {
        return Err(bad(format!("missing required argument `{}`", missing.name)));
    }
    Ok(arguments)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::PromptArgument;

    fn debug_script() -> Prompt {
        Prompt::new(
            "debug-script",
            Some("Run a script and find the bug"),
            Some(vec![
                PromptArgument::new("file").with_required(true),
                PromptArgument::new("args"),
            ]),
        )
    }

    #[test]
    fn prompt_arguments_are_strings_checked_against_the_declared_list() {
        let pairs = ["file=calc.py".to_owned(), "args=--n 3".into()];
        let args = arguments(&debug_script(), &pairs).expect("valid");
        assert_eq!(args.get("file"), Some(&Value::String("calc.py".into())));
        assert_eq!(args.get("args"), Some(&Value::String("--n 3".into())));
        for bad in [
            vec![],
            vec!["args=x".to_owned()],
            vec!["file".to_owned()],
            vec!["file=a.py".to_owned(), "other=1".into()],
        ] {
            assert!(
                matches!(
                    arguments(&debug_script(), &bad),
                    Err(ClientError::BadPromptArguments { .. })
                ),
                "{bad:?} passed"
            );
        }
    }
}
