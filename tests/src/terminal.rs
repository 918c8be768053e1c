//! A real pseudo-terminal for the binary: a private tmux server whose panes are read back
//! with `capture-pane`, so a test sees the screen a person would.

use std::process::Command;
use std::time::{Duration, Instant};

/// A tmux server of its own (`-L <socket>`, no user config), killed when dropped.
#[derive(Debug)]
pub struct Tmux {
    socket: String,
}

impl Tmux {
    /// `None` where tmux is not installed (the caller decides whether that is a skip).
    pub fn new(tag: &str) -> Option<Tmux> {
        if Command::new("tmux").arg("-V").output().is_err() {
            return None;
        }
        Some(Tmux {
            socket: format!("hcp-{tag}-{}", std::process::id()),
        })
    }

    /// `tmux args…` on this server; its standard output.
    pub fn cmd(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .args(["-L", &self.socket, "-f", "/dev/null"])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// The visible screen of session `s`, trailing blank lines dropped.
    pub fn screen(&self, s: &str) -> Vec<String> {
        // -J: a line the terminal wrapped comes back whole.
        let text = self.cmd(&["capture-pane", "-p", "-J", "-t", s]);
        let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_string()).collect();
        while lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        lines
    }

    /// The visible screen of session `s` with its colours and attributes as escape
    /// sequences (`capture-pane -e`), trailing blank lines dropped.
    pub fn screen_ansi(&self, s: &str) -> Vec<String> {
        let text = self.cmd(&["capture-pane", "-p", "-e", "-J", "-t", s]);
        let mut lines: Vec<String> = text.lines().map(|l| l.trim_end().to_string()).collect();
        while lines.last().is_some_and(String::is_empty) {
            lines.pop();
        }
        lines
    }

    /// The screen and 200 lines of scrollback of session `s`, as one text.
    pub fn scrollback(&self, s: &str) -> String {
        self.cmd(&["capture-pane", "-p", "-J", "-t", s, "-S", "-200"])
    }

    /// Polls session `s` until `what` is on it (scrollback included); panics after 120 s.
    pub fn wait_for(&self, s: &str, what: &str) -> String {
        let end = Instant::now() + Duration::from_secs(120);
        loop {
            let screen = self.scrollback(s);
            if screen.contains(what) {
                return screen;
            }
            assert!(Instant::now() < end, "no {what:?} after 120 s:\n{screen}");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .args(["-L", &self.socket, "kill-server"])
            .output();
    }
}

/// `s` as one POSIX shell word.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}
