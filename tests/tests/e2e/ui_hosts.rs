//! The web inspector against DNS rebinding, on a real `hcp-workflow ui`
//! process: a request naming a host the UI was not bound to (an attacker's domain
//! re-pointed at 127.0.0.1) is refused before anything is read, its POST queues nothing
//! even with `--allow-actions-without-token`, and a whitespace-only `--token` is refused.

#![allow(clippy::unwrap_used)]

use hcp_e2e_tests::cluster::run;
use hcp_e2e_tests::{Proc, scratch};

fn ui(dir: &std::path::Path, extra: &[&str]) -> (Proc, String) {
    let db = format!("sqlite://{}", dir.join("journal.db").display());
    let mut args = vec!["--database", db.as_str(), "ui", "--listen", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    let mut p = Proc::spawn(dir, &args, &[]);
    let url = p.ui_url();
    (p, url)
}

#[test]
fn a_rebinding_host_is_refused_and_a_blank_token_does_not_start() {
    let dir = scratch("ui-hosts");
    // A journal with one run, so there is something to read.
    let (code, _, err) = run(
        &dir,
        &[
            "--database",
            &format!("sqlite://{}", dir.join("journal.db").display()),
            "selftest",
        ],
        &[],
    );
    assert_eq!(code, 0, "{err}");
    let (_p, url) = ui(&dir, &["--allow-actions-without-token"]);
    let port = url.rsplit(':').next().unwrap().to_string();
    let http = reqwest::blocking::Client::new();
    for host in ["evil.example".to_string(), format!("evil.example:{port}")] {
        let r = http
            .get(format!("{url}/"))
            .header("Host", &host)
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 421, "{host}");
        let body = r.text().unwrap();
        assert!(!body.contains("selftest"), "{body}");
        let r = http
            .post(format!("{url}/metrics"))
            .header("Host", &host)
            .header("Origin", format!("http://{host}"))
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 421, "POST {host}");
    }
    for host in [format!("127.0.0.1:{port}"), format!("localhost:{port}")] {
        let r = http
            .get(format!("{url}/"))
            .header("Host", &host)
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 200, "{host}");
        assert!(r.text().unwrap().contains("selftest"));
    }
    // A blank token would match a blank header: refused, exit 2, nothing served.
    let (code, _, err) = run(
        &dir,
        &["ui", "--listen", "127.0.0.1:0", "--token", "   "],
        &[],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("--token"), "{err}");
}
