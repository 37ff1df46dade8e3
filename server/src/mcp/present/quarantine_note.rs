//! The lines of a result that name what the check after a run (or a session's exec) moved to
//! the quarantine, and what it has to say besides.

use pyrun_run::quarantine::Quarantined;

/// The lines naming the protected names a run (`by`: "run", "session") created, moved out or not, and what else the
/// check after it has to say (a folder it could not list, a protected entry the run moved).
pub(in crate::mcp) fn quarantine_note(quarantined: &[Quarantined], by: &str) -> Option<String> {
    let names = |moved: bool| {
        quarantined
            .iter()
            .filter(|q| q.moved == moved && (moved || q.note.is_none()))
            .map(|q| match (&q.note, moved) {
                (Some(note), true) => format!("{} ({note})", q.path),
                _ => q.path.clone(),
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let (moved, stayed) = (names(true), names(false));
    let mut notes = Vec::new();
    if !moved.is_empty() {
        notes.push(format!(
            "[Protected names the {by} created were moved to the server's quarantine: {moved}]"
        ));
    }
    if !stayed.is_empty() {
        notes.push(format!(
            "[Protected names the {by} created could not be moved away: {stayed}]"
        ));
    }
    for q in quarantined.iter().filter(|q| !q.moved) {
        if let Some(note) = &q.note {
            notes.push(format!("[{}: {note}]", q.path));
        }
    }
    (!notes.is_empty()).then(|| notes.join("\n"))
}
