//! `call TOOL [--arg k=v]… [--args-json JSON]`: any tool, arguments typed by its input schema.

use rmcp::model::{CallToolResult, JsonObject};
use serde_json::Value;

use crate::cli::CallArgs;
use crate::error::ClientError;
use crate::session::Session;

pub async fn execute(session: &Session, args: &CallArgs) -> Result<CallToolResult, ClientError> {
    let tools = session.list_tools().await?;
    let Some(tool) = tools.iter().find(|t| t.name == args.tool) else {
        return Err(ClientError::UnknownTool {
            name: args.tool.clone(),
            available: tools.iter().map(|t| t.name.to_string()).collect(),
        });
    };
    let arguments = build_arguments(
        &args.tool,
        &tool.input_schema,
        args.args_json.as_deref(),
        &args.args,
    )?;
    check_arguments(&args.tool, &tool.input_schema, &arguments)?;
    session.call_tool(&args.tool, arguments).await
}

/// `--args-json` first, then each `--arg key=value` on top. A value stays a string when the
/// schema allows a string for that key; otherwise it is parsed as JSON (falling back to a string).
pub fn build_arguments(
    tool: &str,
    schema: &JsonObject,
    args_json: Option<&str>,
    pairs: &[String],
) -> Result<JsonObject, ClientError> {
    let bad = |reason: String| ClientError::BadArguments {
        tool: tool.into(),
        reason,
    };
    let mut arguments = match args_json {
        None => JsonObject::new(),
        Some(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(bad("--args-json must be a JSON object".into())),
            Err(e) => return Err(bad(format!("--args-json is not valid JSON: {e}"))),
        },
    };
    for pair in pairs {
        let (key, raw) = pair
            .split_once('=')
            .ok_or_else(|| bad(format!("--arg `{pair}` is not of the form key=value")))?;
        let value = if accepts_string(schema, key) {
            Value::String(raw.to_owned())
        } else {
            serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
        };
        arguments.insert(key.to_owned(), value);
    }
    Ok(arguments)
}

/// Catches what every server would reject, before sending: missing required keys, values of the
/// wrong JSON type, and unknown keys where the schema forbids them.
pub fn check_arguments(
    tool: &str,
    schema: &JsonObject,
    arguments: &JsonObject,
) -> Result<(), ClientError> {
    let bad = |reason: String| {
        Err(ClientError::BadArguments {
            tool: tool.into(),
            reason,
        })
    };
    let properties = schema.get("properties").and_then(Value::as_object);
    let required = schema
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for key in required.filter_map(Value::as_str) {
        if !arguments.contains_key(key) {
            return bad(format!("missing required argument `{key}`"));
        }
    }
    for (key, value) in arguments {
        match properties.and_then(|p| p.get(key)) {
            Some(property) if !type_matches(property, value) => {
                return bad(format!(
                    "`{key}` must be {}, not {value}",
                    describe_type(property)
                ));
            }
            Some(_) => {}
            None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                return bad(format!("unknown argument `{key}`"));
            }
            None => {}
        }
    }
    Ok(())
}

/// JSON-Schema type names a property allows (from `type` and anyOf/oneOf); empty = anything.
fn allowed_types(property: &Value) -> Vec<&str> {
    let mut types: Vec<&str> = match property.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => vec![],
    };
    for key in ["anyOf", "oneOf"] {
        for alternative in property
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let more = allowed_types(alternative);
            if more.is_empty() {
                return vec![]; // an alternative without a type accepts anything
            }
            types.extend(more);
        }
    }
    types
}

fn type_matches(property: &Value, value: &Value) -> bool {
    let types = allowed_types(property);
    types.is_empty()
        || types.iter().any(|t| match *t {
            "string" => value.is_string(),
            "integer" => value.is_i64() || value.is_u64(),
            "number" => value.is_number(),
            "boolean" => value.is_boolean(),
            "array" => value.is_array(),
            "object" => value.is_object(),
            "null" => value.is_null(),
            _ => true,
        })
}

fn describe_type(property: &Value) -> String {
    allowed_types(property).join(" or ")
}

/// Whether the schema of property `key` lists `string` among its types (also inside anyOf/oneOf).
fn accepts_string(schema: &JsonObject, key: &str) -> bool {
    let Some(property) = schema.get("properties").and_then(|p| p.get(key)) else {
        return false;
    };
    fn has_string(s: &Value) -> bool {
        match s.get("type") {
            Some(Value::String(t)) if t == "string" => return true,
            Some(Value::Array(ts)) if ts.iter().any(|t| t == "string") => return true,
            _ => {}
        }
        ["anyOf", "oneOf"].iter().any(|k| {
            s.get(*k)
                .and_then(Value::as_array)
                .is_some_and(|alts| alts.iter().any(has_string))
        })
    }
    has_string(property)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> JsonObject {
        match json!({"type": "object", "properties": {
            "file_name": {"type": "string"},
            "timeout_seconds": {"type": ["integer", "null"]},
            "stdin": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "args": {"type": "array", "items": {"type": "string"}}
        }}) {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        }
    }

    #[test]
    fn values_follow_the_schema() {
        let pairs = [
            "file_name=123".to_owned(),
            "timeout_seconds=5".into(),
            "stdin=true".into(),
            r#"args=["a","b"]"#.into(),
        ];
        let args = build_arguments("run_python", &schema(), None, &pairs).unwrap_or_default();
        assert_eq!(
            Value::Object(args),
            json!({
                "file_name": "123", "timeout_seconds": 5, "stdin": "true", "args": ["a", "b"]
            })
        );
    }

    #[test]
    fn arg_overrides_args_json_and_unknown_keys_guess_json() {
        let pairs = ["file_name=b.py".to_owned(), "extra=x y".into()];
        let args = build_arguments(
            "t",
            &schema(),
            Some(r#"{"file_name": "a.py", "n": 1}"#),
            &pairs,
        )
        .unwrap_or_default();
        assert_eq!(
            Value::Object(args),
            json!({"file_name": "b.py", "n": 1, "extra": "x y"})
        );
    }

    #[test]
    fn arguments_are_checked_against_the_schema() {
        let mut schema = schema();
        schema.insert("required".into(), json!(["file_name"]));
        fn check_with(schema: &JsonObject, v: Value) -> Result<(), ClientError> {
            match v {
                Value::Object(args) => check_arguments("t", schema, &args),
                _ => Ok(()),
            }
        }
        let check = |v: Value| check_with(&schema, v);
        assert!(check(json!({"file_name": "a.py", "timeout_seconds": null, "stdin": "x"})).is_ok());
        assert!(check(json!({"file_name": "a.py", "timeout_seconds": 3, "extra": 1})).is_ok());
        for bad in [
            json!({}),
            json!({"file_name": 1}),
            json!({"file_name": "a.py", "timeout_seconds": "soon"}),
            json!({"file_name": "a.py", "args": "a b"}),
        ] {
            assert!(
                matches!(check(bad.clone()), Err(ClientError::BadArguments { .. })),
                "{bad} passed"
            );
        }
        schema.insert("additionalProperties".into(), json!(false));
        assert!(check_with(&schema, json!({"file_name": "a.py", "extra": 1})).is_err());
    }

    #[test]
    fn malformed_arguments_are_bad_arguments() {
        for (json, pairs) in [
            (Some("[1]"), vec![]),
            (Some("{"), vec![]),
            (None, vec!["novalue".to_owned()]),
        ] {
            assert!(matches!(
                build_arguments("t", &schema(), json, &pairs),
                Err(ClientError::BadArguments { .. })
            ));
        }
    }
}
