//! `interactive`: a small menu on a terminal — run a file (picked from the server's list, with
//! arguments and the script's stdin typed in), list files, list tools, quit. A driver beside
//! `execute` in lib.rs, not a command: it runs the commands and hands their data to `output`,
//! which prints every line of the conversation. Ctrl-C during a run cancels that run and the
//! menu comes back; Ctrl-C at the menu ends the session.

use tokio::io::{AsyncBufReadExt, BufReader, Lines, Stdin};

use crate::cli::RunArgs;
use crate::commands::{files, run, tools};
use crate::error::ClientError;
use crate::output::Output;
use crate::session::Session;

const MENU: &str = "\n  1) run a file   2) list files   3) list tools   q) quit\n";

type Input = Lines<BufReader<Stdin>>;

/// Ends with 0 on `q` or end of input; each run shows its exit code instead.
pub async fn execute(session: &Session, output: &Output) -> Result<u8, ClientError> {
    let mut input = BufReader::new(tokio::io::stdin()).lines();
    let name = session.server_name().unwrap_or_else(|| "the server".into());
    output.connected(&name);
    loop {
        let Some(choice) = prompt(session, &mut input, output, &format!("{MENU}> ")).await? else {
            return Ok(0);
        };
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
        // A failed or stopped action is reported and the menu comes back.
        match step {
            Err(ClientError::Interrupted) => output.note("cancelled"),
            Err(e) => output.error(&e),
            Ok(()) => {}
        }
    }
}

async fn run_one(
    session: &Session,
    input: &mut Input,
    output: &Output,
) -> Result<Option<u8>, ClientError> {
    let Some(file) = pick_file(session, input, output).await? else {
        return Ok(None);
    };
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
    let Some(stdin) = read_stdin(session, input, output).await? else {
        return Ok(None);
    };
    let run_args = RunArgs {
        file,
        script_args: vec![],
        args,
        stdin_file: None,
        stdin_text: stdin,
        script_timeout: None,
        detach: false,
        save_artifacts: None,
    };
    let report = run::execute(session, &run_args, true).await?;
    output.run_report(&report, false);
    Ok(Some(report.exit_code()))
}

/// The server's files, numbered; the answer is a number or a path. `None`: nothing picked.
async fn pick_file(
    session: &Session,
    input: &mut Input,
    output: &Output,
) -> Result<Option<String>, ClientError> {
    let list = files::execute(session, None).await?;
    output.numbered(&list.files);
    let Some(answer) = prompt(session, input, output, "file (number or path): ").await? else {
        return Ok(None);
    };
    if answer.is_empty() {
        return Ok(None);
    }
    let picked = answer
        .parse::<usize>()
        .ok()
        .and_then(|n| n.checked_sub(1))
        .and_then(|i| list.files.get(i).cloned());
    Ok(Some(picked.unwrap_or(answer)))
}

/// The script's stdin, typed line by line until an empty line (`Some(None)`: none at all);
/// `None` at end of input.
async fn read_stdin(
    session: &Session,
    input: &mut Input,
    output: &Output,
) -> Result<Option<Option<String>>, ClientError> {
    output.note("stdin for the script, line by line; an empty line ends it:");
    let mut text = String::new();
    loop {
        match prompt(session, input, output, "| ").await? {
            None => return Ok(None),
            Some(line) if line.is_empty() => break,
            Some(line) => {
                text.push_str(&line);
                text.push('\n');
            }
        }
    }
    Ok(Some((!text.is_empty()).then_some(text)))
}

/// `None` at end of input.
async fn prompt(
    session: &Session,
    input: &mut Input,
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
