//! `interactive`: a small menu on a terminal — run a file, list files, list tools, quit.

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines, Stdin};

use super::{files, run, tools};
use crate::cli::RunArgs;
use crate::error::ClientError;
use crate::output::Output;
use crate::session::Session;

const MENU: &str = "\n  1) run a file   2) list files   3) list tools   q) quit\n";

/// Ends with 0 on `q` or end of input; each run shows its exit code instead.
pub async fn execute(session: &Session, output: &Output) -> Result<u8, ClientError> {
    let mut input = BufReader::new(tokio::io::stdin()).lines();
    let name = session.server_name().unwrap_or_else(|| "the server".into());
    eprintln!("connected to {name}");
    loop {
        let Some(choice) = prompt(session, &mut input, &format!("{MENU}> ")).await? else {
            return Ok(0);
        };
        // A failed action is reported and the menu comes back; Ctrl-C still ends the session.
        let step = match choice.as_str() {
            "1" | "r" | "run" => run_one(session, &mut input, output).await.map(|code| {
                if let Some(code) = code {
                    eprintln!("[exit code {code}]");
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
                eprintln!("unknown choice `{other}`");
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
    let Some(file) = prompt(session, input, "file: ").await? else {
        return Ok(None);
    };
    if file.is_empty() {
        return Ok(None);
    }
    let Some(line) = prompt(session, input, "arguments (shell-style, empty for none): ").await?
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
    };
    let report = run::execute(session, &run_args).await?;
    output.run_report(&report);
    Ok(Some(report.exit_code()))
}

/// `None` at end of input.
async fn prompt(
    session: &Session,
    input: &mut Lines<BufReader<Stdin>>,
    text: &str,
) -> Result<Option<String>, ClientError> {
    let mut stderr = tokio::io::stderr();
    let _ = stderr.write_all(text.as_bytes()).await;
    let _ = stderr.flush().await;
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
