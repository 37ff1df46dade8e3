//! `interactive`: a small menu on a terminal — run a file, list files, list tools, quit. A driver
//! beside `execute` in lib.rs, not a command: it runs the commands and hands their data to `output`,
//! which prints every line of the conversation.

use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

use crate::cli::RunArgs;
use crate::commands::{files, run, tools};
use crate::error::ClientError;
use crate::output::Output;
use crate::session::Session;

const MENU: &str = "\n  1) run a file   2) list files   3) list tools   q) quit\n";

/// Ends with 0 on `q` or end of input; each run shows its exit code instead.
pub async fn execute(session: &Session, output: &Output) -> Result<u8, ClientError> {
    let mut input = BufReader::new(tokio::io::stdin()).lines();
    let name = session.server_name().unwrap_or_else(|| "the server".into());
    output.connected(&name);
    loop {
        let Some(choice) = prompt(session, &mut input, output, &format!("{MENU}> ")).await? else {
            return Ok(0);
        };
        // A failed action is reported and the menu comes back; Ctrl-C still ends the session.
        let step = match choice.as_str() {
            "1" | "r" | "run" => run_one(session, &mut input, output).await.map(|code| {
                if let Some(code) = code {
                    output.run_exit_code(code);
                }
            }),
            "2" | "f" | "files" => files::execute(session, None)
                .await
                .map(|list| output.files(&list)),
            "3" | "t" | "tools" => tools::execute(session)
                .await
                .map(|t| output.tools(&t, false)),
            "q" | "quit" | "exit" => return Ok(0),
            "" => Ok(()),
            other => {
                output.unknown_choice(other);
                Ok(())
            }
        };
        match step {
            Err(e @ (ClientError::Interrupted | ClientError::Timeout(_))) => return Err(e),
            Err(e) => output.error(&e),
            Ok(()) => {}
        }
    }
}

async fn run_one(
    session: &Session,
    input: &mut Lines<BufReader<Stdin>>,
    output: &Output,
) -> Result<Option<u8>, ClientError> {
    let Some(file) = prompt(session, input, output, "file: ").await? else {
        return Ok(None);
    };
    if file.is_empty() {
        return Ok(None);
    }
    let Some(line) = prompt(
        session,
        input,
        output,
        "arguments (shell-style, empty for none): ",
    )
    .await?
    else {
        return Ok(None);
    };
    let args = shlex::split(&line).ok_or_else(|| ClientError::BadArguments {
        tool: run::TOOL.into(),
        reason: "unbalanced quotes".into(),
    })?;
    let run_args = RunArgs {
        file,
        args,
        stdin_file: None,
        script_timeout: None,
        detach: false,
        save_artifacts: None,
    };
    let report = run::execute(session, &run_args).await?;
    output.run_report(&report, false);
    Ok(Some(report.exit_code()))
}

/// `None` at end of input.
async fn prompt(
    session: &Session,
    input: &mut Lines<BufReader<Stdin>>,
    output: &Output,
    text: &str,
) -> Result<Option<String>, ClientError> {
    output.prompt(text);
    let line = session
        .limits()
        .guard(async {
            input.next_line().await.map_err(|source| ClientError::Io {
                context: "cannot read stdin".into(),
                source,
            })
        })
        .await?;
    Ok(line.map(|l| l.trim().to_owned()))
}
