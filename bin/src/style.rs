//! Whether to colour output: only on a terminal, never with `NO_COLOR`
//! (<https://no-color.org>), always with `CLICOLOR_FORCE`.
//!
//! Precedence: `NO_COLOR` (set and not empty) turns colour off; else `CLICOLOR_FORCE` (set,
//! not empty and not `0`) turns it on; else `CLICOLOR=0` or `TERM=dumb` turn it off; else
//! colour is on when the stream is a terminal.

use std::io::IsTerminal;

/// An output stream of this process.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Stream {
    Stdout,
    Stderr,
}

/// Whether text written to `stream` may carry ANSI colour escapes.
pub fn color_enabled(stream: Stream) -> bool {
    let tty = match stream {
        Stream::Stdout => std::io::stdout().is_terminal(),
        Stream::Stderr => std::io::stderr().is_terminal(),
    };
    decide(tty, |k| std::env::var(k).ok())
}

/// Whether stdout may be coloured.
pub fn stdout_color() -> bool {
    color_enabled(Stream::Stdout)
}

/// Whether stderr (logs, progress) may be coloured.
pub fn stderr_color() -> bool {
    color_enabled(Stream::Stderr)
}

/// `text` (already padded) in the colour of run state `state` when stdout may be coloured:
/// succeeded green; rolled-back and cancelled yellow; needs-operator and failed red;
/// running states blue. The same palette as the web UI.
pub fn paint_state(text: &str, state: &str) -> String {
    if !stdout_color() {
        return text.to_string();
    }
    let code = match state {
        "succeeded" => "32",
        "rolled-back" | "cancelled" => "33",
        "needs-operator" | "failed" | "undo-failed" => "31",
        "running" | "unwinding" | "waiting" | "pending" => "34",
        _ => return text.to_string(),
    };
    format!("\x1b[{code}m{text}\x1b[0m")
}

/// The rule, over whether the stream is a terminal and a view of the environment.
fn decide(tty: bool, env: impl Fn(&str) -> Option<String>) -> bool {
    let set = |k: &str| env(k).filter(|v| !v.is_empty());
    if set("NO_COLOR").is_some() {
        return false;
    }
    if set("CLICOLOR_FORCE").is_some_and(|v| v != "0") {
        return true;
    }
    if set("CLICOLOR").is_some_and(|v| v == "0") || set("TERM").is_some_and(|v| v == "dumb") {
        return false;
    }
    tty
}

/// A view of the environment made of `vars` (tests of environment-driven rules).
#[cfg(test)]
pub(crate) fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| (*v).to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::decide;
    use super::env_of as env;

    #[test]
    fn colour_only_on_a_terminal_unless_told() {
        assert!(decide(true, env(&[])));
        assert!(!decide(false, env(&[])));
        assert!(!decide(true, env(&[("NO_COLOR", "1")])));
        // An empty NO_COLOR does not count (no-color.org).
        assert!(decide(true, env(&[("NO_COLOR", "")])));
        assert!(decide(false, env(&[("CLICOLOR_FORCE", "1")])));
        assert!(!decide(false, env(&[("CLICOLOR_FORCE", "0")])));
        assert!(!decide(
            false,
            env(&[("NO_COLOR", "1"), ("CLICOLOR_FORCE", "1")])
        ));
        assert!(!decide(true, env(&[("CLICOLOR", "0")])));
        assert!(!decide(true, env(&[("TERM", "dumb")])));
    }
}
