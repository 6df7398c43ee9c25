//! What a paste's page costs the gateway, against a real `pastebin up`
//! (docs/reader-features.md#caching, docs/security.md): one highlighted
//! render per paste however many views and reveals arrive at once, a render
//! that nobody waits for any more is stopped, and a page written as its
//! readers read it, so slow readers of a large page hold little memory while
//! other clients are served. Every wait is bounded, every socket on loopback.

use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    time::Duration,
};

use pastebin_tests::{
    api::new_key,
    cluster::{Process, HIGHLIGHT_BUDGET_FOR_TESTS},
};
use reqwest::{header, Client, StatusCode};
use serde_json::{json, Value};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpSocket, TcpStream},
};

/// A running `pastebin up` on port 0 with its own data directory.
struct Up {
    process: Process,
    http: String,
    _data: tempfile::TempDir,
}

impl Up {
    /// `failpoints` arms `PASTEBIN_FAILPOINTS` (empty: none).
    async fn start(failpoints: &str) -> Up {
        let data = tempfile::tempdir().unwrap();
        let mut args: Vec<String> = ["up", "--data-dir", data.path().to_str().unwrap()].map(String::from).to_vec();
        for flag in ["--http", "--grpc", "--admin"] {
            args.extend([flag.to_owned(), "127.0.0.1:0".to_owned()]);
        }
        // A debug build's render on a loaded machine may outlast the default 30 s.
        args.extend(["--request-timeout-secs".to_owned(), BOUND.as_secs().to_string()]);
        let (name, value) = HIGHLIGHT_BUDGET_FOR_TESTS;
        let mut env = vec![(name.to_owned(), value.to_owned())];
        if !failpoints.is_empty() {
            env.push(("PASTEBIN_FAILPOINTS".to_owned(), failpoints.to_owned()));
        }
        let process = Process::start(args, env, &["gateway-http", "admin"]).await;
        let http = format!("http://{}", process.address("gateway-http"));
        Up { process, http, _data: data }
    }

    async fn create(&self, body: Value) -> String {
        let response = Client::new()
            .post(format!("{}/api/v1/pastes", self.http))
            .header("Idempotency-Key", new_key())
            .json(&body)
            .timeout(BOUND)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::CREATED);
        response.json::<Value>().await.unwrap()["id"].as_str().expect("a 201 has an id").to_owned()
    }

    /// The value of one series on the admin listener's `/metrics`, 0 if absent.
    async fn metric(&self, series: &str) -> f64 {
        let metrics = reqwest::get(format!("http://{}/metrics", self.process.address("admin")))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        metrics
            .lines()
            .find_map(|line| line.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
            .map_or(0.0, |value| value.trim().parse().expect("a metric value is a number"))
    }

    /// Every render, whatever its outcome.
    async fn renders(&self) -> f64 {
        let mut total = 0.0;
        for outcome in ["highlighted", "out_of_time", "abandoned"] {
            total += self.metric(&format!("pastebin_page_renders_total{{outcome=\"{outcome}\"}}")).await;
        }
        total
    }

    /// The resident set of the whole process, in bytes.
    fn rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.process.pid())).unwrap();
        let kib: u64 = status
            .lines()
            .find_map(|line| line.strip_prefix("VmRSS:"))
            .and_then(|value| value.trim().strip_suffix("kB"))
            .map(|value| value.trim().parse().unwrap())
            .expect("/proc/PID/status has VmRSS");
        kib * 1024
    }
}

/// Generous: nothing here is timed, every wait only has to end.
const BOUND: Duration = Duration::from_secs(120);

/// Lines of [`rust_paste`].
const RUST_LINES: usize = 400;

/// About 40 KiB of Rust (within the highlighting bounds): a render costs
/// real CPU, in a debug build seconds.
fn rust_paste() -> String {
    (0..RUST_LINES)
        .map(|i| format!("fn step_{i}(x: u32) -> u32 {{ let y = x.wrapping_mul({i}) + 1; if y > 10 {{ y - 3 }} else {{ y }} }}\n"))
        .collect()
}

/// A client whose connections come from `127.0.0.N`, so that per-address
/// shares at the edge see several clients rather than one.
fn client_from(n: u8) -> Client {
    Client::builder().local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n))).timeout(BOUND).build().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_concurrent_reveals_and_views_cost_one_render() {
    // The render waits a moment before it starts, so the reveals arrive while it is in flight.
    let up = Up::start("before_page_render=sleep:1500").await;
    let id = up.create(json!({ "content": rust_paste(), "language": "rust" })).await;

    let reveals = (0..64u8).map(|n| {
        let (client, url) = (client_from(2 + n % 8), format!("{}/{id}", up.http));
        async move {
            let response = client.post(url).header(header::ACCEPT, "text/html").send().await.unwrap();
            (response.status(), response.text().await.unwrap())
        }
    });
    let pages = futures::future::join_all(reveals).await;
    for (status, page) in &pages {
        assert_eq!(*status, StatusCode::OK, "{page}");
        assert!(page.contains("class=\"hl-"), "every reveal shows the highlighted lines");
        assert_eq!(page.matches("<li>").count(), RUST_LINES);
    }
    let viewed = client_from(2).get(format!("{}/{id}", up.http)).header(header::ACCEPT, "text/html").send().await;
    let viewed = viewed.unwrap().text().await.unwrap();
    assert_eq!(viewed, pages[0].1, "GET shows the reveal's render");

    assert_eq!(up.metric("pastebin_page_reveals_total").await, 64.0, "every reveal is counted");
    let renders = up.renders().await;
    assert!(renders <= 2.0, "64 concurrent reveals and a view cost {renders} renders");
    assert_eq!(up.metric("pastebin_page_renders_total{outcome=\"highlighted\"}").await, 1.0);
}

/// Sends `GET /{id}` for the page on a raw connection and leaves it open.
async fn open_page_request(up: &Up, id: &str) -> TcpStream {
    let mut stream = TcpStream::connect(up.process.address("gateway-http")).await.unwrap();
    let request = format!("GET /{id} HTTP/1.1\r\nHost: x\r\nAccept: text/html\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    stream
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_render_whose_only_viewer_hung_up_is_stopped_and_not_kept() {
    let up = Up::start("before_page_render=sleep:3000").await;
    let id = up.create(json!({ "content": rust_paste(), "language": "rust" })).await;

    let viewer = open_page_request(&up, &id).await;
    assert!(up.process.wait_for_log("before_page_render", BOUND).await, "the render started and is held");
    drop(viewer);
    let stopped = async {
        while up.metric("pastebin_page_renders_total{outcome=\"abandoned\"}").await < 1.0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    };
    tokio::time::timeout(BOUND, stopped).await.expect("the render saw that nobody waits and stopped");
    assert_eq!(up.metric("pastebin_page_renders_total{outcome=\"highlighted\"}").await, 0.0);

    // Nothing was kept: the next view renders again, and that render is kept.
    for _ in 0..2 {
        let page = client_from(2).get(format!("{}/{id}", up.http)).header(header::ACCEPT, "text/html").send().await;
        assert!(page.unwrap().text().await.unwrap().contains("class=\"hl-"));
    }
    assert_eq!(up.metric("pastebin_page_renders_total{outcome=\"highlighted\"}").await, 1.0);
}

/// Opens a connection from `127.0.0.N` with a small receive buffer, asks
/// for the page and reads only until its headers arrived: from then on it
/// reads nothing.
async fn slow_reader(address: SocketAddr, n: u8, id: &str) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    socket.bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n)), 0)).unwrap();
    let mut stream = socket.connect(address).await.unwrap();
    let request = format!("GET /{id} HTTP/1.1\r\nHost: x\r\nAccept: text/html\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).await.unwrap(), 1, "the page's answer starts");
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&head));
    stream
}

/// How many connections read the page slowly at once; on the old code each
/// held the whole page (9.4 MB and copies), here a few blocks.
const SLOW_READERS: u8 = 48;

/// Loose: idle RSS plus this much, whereas the whole page held per reader
/// is several hundred MB for [`SLOW_READERS`].
const RSS_ALLOWANCE: u64 = 128 * 1024 * 1024;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_readers_of_a_large_page_hold_little_memory_and_others_are_served() {
    let up = Up::start("").await;
    let id = up.create(json!({ "content": "\n".repeat(1024 * 1024) })).await;
    // Read once in full, so the paste and the process's allocator are warm before the baseline.
    let whole = client_from(2).get(format!("{}/{id}", up.http)).header(header::ACCEPT, "text/html").send().await;
    let whole = whole.unwrap().text().await.unwrap();
    assert_eq!(whole.matches("<li></li>").count(), 1024 * 1024, "one item per line of the paste");
    drop(whole);
    let idle = up.rss();

    let address: SocketAddr = up.process.address("gateway-http").parse().unwrap();
    let mut readers = Vec::new();
    for n in 0..SLOW_READERS {
        readers.push(slow_reader(address, 10 + n % 16, &id).await);
    }
    // Let every answer run into its stalled reader, then look at the peak.
    let mut peak = 0;
    for _ in 0..10 {
        tokio::time::sleep(Duration::from_millis(500)).await;
        peak = peak.max(up.rss());
    }
    let grown = peak.saturating_sub(idle);
    eprintln!("{SLOW_READERS} slow readers: RSS {} MiB idle, {} MiB at the peak", idle >> 20, peak >> 20);
    assert!(grown < RSS_ALLOWANCE, "{SLOW_READERS} slow readers grew RSS by {} MiB", grown >> 20);

    // Another client is served meanwhile, page and all.
    let other = client_from(3).get(format!("{}/{id}", up.http)).header(header::ACCEPT, "text/html").send().await;
    let other = other.unwrap();
    assert_eq!(other.status(), StatusCode::OK);
    assert_eq!(other.text().await.unwrap().matches("<li></li>").count(), 1024 * 1024);
    let created = up.create(json!({ "content": "still serving" })).await;
    assert!(!created.is_empty());
    drop(readers);
}
