//! A local webhook receiver for the notification tests.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Every JSON body POSTed, and how many requests came.
#[derive(Debug, Default)]
pub struct Received {
    /// The bodies of the requests answered 200, in order.
    pub bodies: Vec<serde_json::Value>,
    /// Every request, the ones answered 503 included.
    pub requests: usize,
}

/// A tiny HTTP/1.1 webhook receiver on 127.0.0.1 (one request per connection): the URL to
/// POST to (`path` appended) and what it received. With `fail_first` the first request is
/// answered 503 (to see it retried).
pub fn receiver(path: &str, fail_first: bool) -> (String, Arc<Mutex<Received>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}{path}", l.local_addr().unwrap());
    let got = Arc::new(Mutex::new(Received::default()));
    let g = got.clone();
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut c) = conn else { continue };
            let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
            let mut buf = Vec::new();
            let mut chunk = [0u8; 4096];
            let (head_end, len) = loop {
                let Ok(n) = c.read(&mut chunk) else {
                    break (0, 0);
                };
                if n == 0 {
                    break (0, 0);
                }
                buf.extend_from_slice(&chunk[..n]);
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&buf[..i]).to_ascii_lowercase();
                    let len = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    break (i + 4, len);
                }
            };
            if head_end == 0 {
                continue;
            }
            while buf.len() < head_end + len {
                match c.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let first = {
                let mut r = g.lock().unwrap();
                r.requests += 1;
                r.requests == 1
            };
            let status = if first && fail_first {
                "503 Service Unavailable"
            } else {
                let body: serde_json::Value =
                    serde_json::from_slice(&buf[head_end..]).unwrap_or_default();
                g.lock().unwrap().bodies.push(body);
                "200 OK"
            };
            let _ = c.write_all(
                format!("HTTP/1.1 {status}\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
                    .as_bytes(),
            );
        }
    });
    (url, got)
}
