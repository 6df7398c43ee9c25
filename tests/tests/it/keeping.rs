//! Keeping a public instance (docs/operations.md#reports-and-takedowns,
//! docs/configuration.md#expiry-policy), on real processes: a takedown
//! reaches every gateway within the read cache's bound while a replay of
//! the create's key still answers its 201; reports from the API and from a
//! page in Chromium reach `ctl reports`, in either order; reports and
//! takedowns move with their slots, a late one whose caller gave up too;
//! the dashboard counts the open reports; the operator's expiry choices are
//! what the page offers and all the API takes; `/api/v1/limits` says what
//! the flags set, and the client refuses locally with the server's words;
//! `pastebin get` round-trips text and bytes; no user error prints a
//! backtrace.

use std::{path::Path, process::Output, time::Duration};

use pastebin_core::{ManualClock, PasteId};
use pastebin_ctl::reshard::failpoint;
use pastebin_tests::{
    api::new_key,
    cluster::{testbed_binary, Cluster, ClusterOptions, Process},
    postgres::sqlite_url,
};
use reqwest::{header, Client, StatusCode};
use serde_json::{json, Value};

use crate::{
    adopt::key_on_paste_shard,
    operators::{ctl, status_when},
    reshard::{ctl_reshard_command, finished, move_args, HIGH},
    reshard_mistakes::reached,
};

/// How long a gateway trusts P's "live" for a cached paste
/// (pastebin_gateway's `cache::LIVE_FOR`, docs/design.md#caching): the bound
/// on how late a takedown reaches a gateway's read cache.
const LIVE_FOR: Duration = Duration::from_millis(750);

pub(crate) async fn create(http: &str, key: &str, body: Value) -> (StatusCode, String, Option<String>) {
    let response = Client::new()
        .post(format!("{http}/api/v1/pastes"))
        .header("Idempotency-Key", key)
        .json(&body)
        .send()
        .await
        .expect("the gateway answers");
    let replayed = response.headers().get("idempotent-replayed").map(|v| v.to_str().unwrap().to_owned());
    (response.status(), response.text().await.unwrap(), replayed)
}

/// Stores a sealed paste's `envelope` as the page and the client do; its id.
pub(crate) async fn create_sealed(http: &str, envelope: Vec<u8>) -> String {
    let made = Client::new()
        .post(format!("{http}/api/v1/pastes"))
        .header("Idempotency-Key", new_key())
        .header("Content-Type", pastebin_sealed::MEDIA_TYPE)
        .body(envelope)
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), StatusCode::CREATED);
    made.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
}

pub(crate) async fn read(url: &str, accept: &str) -> (StatusCode, String) {
    let response = Client::new().get(url).header(header::ACCEPT, accept).send().await.expect("the gateway answers");
    (response.status(), response.text().await.unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_takedown_reaches_every_gateway_within_the_cache_bound_and_a_replay_still_answers_201() {
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let second = cluster.another_gateway(&cluster.s3, "").await;
    let gateways = [cluster.http.clone(), format!("http://{}", second.address("gateway-http"))];
    let key = new_key();
    let (status, first_201, _) = create(&gateways[0], &key, json!({ "content": "to be taken down" })).await;
    assert_eq!(status, StatusCode::CREATED, "{first_201}");
    let id = serde_json::from_str::<Value>(&first_201).unwrap()["id"].as_str().unwrap().to_owned();
    // Both gateways read it (twice: the second read is a cache hit) and so hold it in their read caches.
    for http in &gateways {
        for _ in 0..2 {
            let (status, body) = read(&format!("{http}/api/v1/pastes/{id}"), "application/json").await;
            assert_eq!(status, StatusCode::OK, "{body}");
        }
    }

    let reason = "phishing kit (ticket 4711)";
    let (exit, out, err) = ctl(&cluster, &["takedown", &id, "--reason", reason, "--operator", "alice"]).await;
    assert_eq!(exit, pastebin_ctl::Exit::Ok, "{out}{err}");
    assert!(out.contains("taken down"), "{out}");
    // The stated bound: a cached entry is served at most LIVE_FOR after P
    // last confirmed it; from then on every read asks P first.
    tokio::time::sleep(LIVE_FOR + Duration::from_millis(50)).await;
    for http in &gateways {
        for url in [format!("{http}/api/v1/pastes/{id}"), format!("{http}/raw/{id}"), format!("{http}/{id}")] {
            let (status, body) = read(&url, "application/json").await;
            assert_eq!(status, StatusCode::GONE, "{url}: {body}");
            assert!(body.contains("removed_by_operator") && body.contains(reason), "{url}: {body}");
        }
        let (status, page) = read(&format!("{http}/{id}"), "text/html").await;
        assert_eq!(status, StatusCode::GONE);
        assert!(page.contains("removed by the operator") && page.contains("ticket 4711"), "{page}");
        // A replay of the create's key still answers its stored 201, byte for byte.
        let (status, replay, replayed) = create(http, &key, json!({ "content": "to be taken down" })).await;
        assert_eq!((status, replayed.as_deref()), (StatusCode::CREATED, Some("true")), "{replay}");
        assert_eq!(replay, first_201);
        let (status, _) = read(&format!("{http}/api/v1/pastes/{id}"), "application/json").await;
        assert_eq!(status, StatusCode::GONE, "the replay did not bring it back");
    }
    let objects = cluster.object_store().await;
    assert_eq!(objects.get(&id).await.expect("the store answers"), None, "the object is deleted");
    // Repeating it is harmless and says so; an id with no paste is refused.
    let (exit, out, _) = ctl(&cluster, &["takedown", &id, "--reason", reason]).await;
    assert_eq!((exit, out.contains("already taken down")), (pastebin_ctl::Exit::Ok, true), "{out}");
    let (exit, _, err) = ctl(&cluster, &["takedown", "00000000000000", "--reason", "x"]).await;
    assert_eq!(exit, pastebin_ctl::Exit::Failed, "{err}");
    // One round of every reaper (expiry, objects, tombstones), the
    // sweeper's clock 400 days on so everything it times itself is due; P
    // times expiry and tombstone retention by its own clock, so the
    // takedown's tombstone is kept (for --tombstone-retention-secs,
    // docs/operations.md#reports-and-takedowns) and still answers 410.
    let clock = ManualClock::starting_at(chrono::Utc::now() + chrono::Duration::days(400));
    cluster.sweeper(clock).await.round(true).await;
    let (status, body) = read(&format!("{}/api/v1/pastes/{id}", gateways[1]), "application/json").await;
    assert_eq!(status, StatusCode::GONE, "{body}");
    let audit = cluster.pastes[0].logs();
    assert!(audit.contains("paste taken down by the operator") && audit.contains("alice"), "{audit}");
}

/// `ctl reports --json` with `extra`: the listed pastes' ids in its order, and the whole answer.
async fn reported_ids(cluster: &Cluster, extra: &[&str]) -> (Vec<String>, Value) {
    let (exit, out, err) = ctl(cluster, &[&["reports", "--json"], extra].concat()).await;
    assert_eq!(exit, pastebin_ctl::Exit::Ok, "{err}");
    let listed: Value = serde_json::from_str(&out).expect("reports --json is JSON");
    let ids = listed["pastes"].as_array().unwrap().iter().map(|p| p["id"].as_str().unwrap().to_owned()).collect();
    (ids, listed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reports_from_the_api_and_a_page_in_chromium_show_in_ctl_reports() {
    pastebin_tests::browser::require_tools();
    let cluster = Cluster::start(ClusterOptions::default()).await;
    let key = new_key();
    let (_, created, _) = create(&cluster.http, &key, json!({ "content": "buy cheap watches" })).await;
    let id = serde_json::from_str::<Value>(&created).unwrap()["id"].as_str().unwrap().to_owned();
    let (_, quiet, _) = create(&cluster.http, &new_key(), json!({ "content": "nobody minds me" })).await;
    let quiet = serde_json::from_str::<Value>(&quiet).unwrap()["id"].as_str().unwrap().to_owned();

    let reported = Client::new()
        .post(format!("{}/api/v1/pastes/{id}/reports", cluster.http))
        .json(&json!({ "reason": "spam", "note": "the same ad, fifty times" }))
        .send()
        .await
        .unwrap();
    assert_eq!(reported.status(), StatusCode::CREATED);
    let refused = Client::new()
        .post(format!("{}/api/v1/pastes/{id}/reports", cluster.http))
        .json(&json!({ "reason": "boring" }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), StatusCode::BAD_REQUEST, "an unknown reason stores nothing");

    let mut api =
        pastebin_proto::api::v1::paste_api_client::PasteApiClient::connect(cluster.grpc.clone()).await.unwrap();
    let over_grpc = pastebin_proto::api::v1::ReportPasteRequest {
        id: id.clone(),
        reason: "other".into(),
        note: Some("over gRPC".into()),
    };
    api.report_paste(over_grpc).await.expect("gRPC takes the report");
    let result = pastebin_tests::browser::run_phase(&cluster, &["report", &id]).await;
    assert_eq!(result["received"], true, "{result}");

    let (exit, out, err) = ctl(&cluster, &["reports", "--json"]).await;
    assert_eq!(exit, pastebin_ctl::Exit::Ok, "{err}");
    let listed: Value = serde_json::from_str(&out).expect("reports --json is JSON");
    assert_eq!(listed["open_reports"], 3, "{listed}");
    let pastes = listed["pastes"].as_array().unwrap();
    assert_eq!(pastes.len(), 1, "only the reported paste: {listed}");
    assert_eq!(pastes[0]["id"], id.as_str());
    assert_eq!(pastes[0]["reports"], 3);
    assert_eq!(pastes[0]["size"], "buy cheap watches".len());
    let reasons: Vec<&str> =
        pastes[0]["recent"].as_array().unwrap().iter().map(|r| r["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons, ["malware", "other", "spam"], "newest first: the page's, gRPC's, then the API's");
    assert_eq!(pastes[0]["recent"][0]["note"], "from the browser");
    assert_eq!(pastes[0]["encrypted"], false, "a plain paste: {listed}");
    assert!(!out.contains(&quiet));

    // A sealed paste is reported as encrypted: the operator knows the server cannot read it.
    let sealed = pastebin_sealed::seal(b"nobody reads me here", None).expect("seal");
    let sealed_id = create_sealed(&cluster.http, sealed.envelope).await;
    let reported = Client::new()
        .post(format!("{}/api/v1/pastes/{sealed_id}/reports", cluster.http))
        .json(&json!({ "reason": "illegal" }))
        .send()
        .await
        .unwrap();
    assert_eq!(reported.status(), StatusCode::CREATED);
    // By default the newest report comes first: the sealed paste's, reported
    // once after the other's three; `--order most` puts the three first.
    let (newest, listed) = reported_ids(&cluster, &["--order", "newest"]).await;
    assert_eq!(newest, [sealed_id.clone(), id.clone()], "newest first: {listed}");
    assert_eq!(listed["open_reports"], 4, "{listed}");
    assert_eq!((&listed["pastes"][0]["reports"], &listed["pastes"][0]["encrypted"]), (&json!(1), &json!(true)));
    assert_eq!(reported_ids(&cluster, &[]).await.0, newest, "newest is the default order");
    let (most, listed) = reported_ids(&cluster, &["--order", "most"]).await;
    assert_eq!(most, [id.clone(), sealed_id.clone()], "most reported first: {listed}");

    let (_, table, _) = ctl(&cluster, &["reports", "--order", "most"]).await;
    assert!(table.starts_with("open reports: 4") && table.contains(&id), "{table}");
    // A takedown closes the paste's reports.
    let (exit, _, err) = ctl(&cluster, &["takedown", &id, "--reason", "spam"]).await;
    assert_eq!(exit, pastebin_ctl::Exit::Ok, "{err}");
    let (_, out, _) = ctl(&cluster, &["reports", "--json"]).await;
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["open_reports"], 1, "only the sealed paste's: {out}");

    // The sealed paste's page offers the report link too (it shows once the
    // script opens the paste), and its form answers.
    let (status, page) = read(&format!("{}/{sealed_id}", cluster.http), "text/html").await;
    assert_eq!(status, StatusCode::OK, "{page}");
    let link = format!("<a id=\"report\" href=\"/{sealed_id}/report\">report</a>");
    assert!(page.contains("id=\"sealed-paste\"") && page.contains(&link), "{page}");
    let (status, form) = read(&format!("{}/{sealed_id}/report", cluster.http), "text/html").await;
    assert_eq!(status, StatusCode::OK, "{form}");
    // A sealed paste is taken down by its id alone, the server never having
    // its key: readers get 410 with the reason, on the API and the page.
    let reason = "court order 12/2026";
    let (exit, out, err) = ctl(&cluster, &["takedown", &sealed_id, "--reason", reason]).await;
    assert_eq!(exit, pastebin_ctl::Exit::Ok, "{out}{err}");
    tokio::time::sleep(LIVE_FOR + Duration::from_millis(50)).await;
    let (status, body) = read(&format!("{}/api/v1/pastes/{sealed_id}", cluster.http), "application/json").await;
    assert_eq!(
        (status, body.contains("removed_by_operator") && body.contains(reason)),
        (StatusCode::GONE, true),
        "{body}"
    );
    let (status, page) = read(&format!("{}/{sealed_id}", cluster.http), "text/html").await;
    assert_eq!(status, StatusCode::GONE, "{page}");
    assert!(page.contains("removed by the operator") && page.contains(reason), "{page}");
    assert!(!page.contains("id=\"sealed-paste\""), "nothing left for the script to open: {page}");
    let (_, out, _) = ctl(&cluster, &["reports", "--json"]).await;
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["open_reports"], 0, "{out}");
}

fn up_args(data: &Path, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = ["up", "--data-dir", data.to_str().expect("UTF-8 temp dir")].map(String::from).to_vec();
    for flag in ["--http", "--grpc", "--admin"] {
        args.extend([flag.to_owned(), "127.0.0.1:0".to_owned()]);
    }
    args.extend(extra.iter().map(|a| a.to_string()));
    args
}

pub(crate) async fn start_up(data: &Path, extra: &[&str]) -> (Process, String) {
    let up = Process::start(up_args(data, extra), vec![], &["gateway-http", "gateway-grpc", "admin"]).await;
    let http = format!("http://{}", up.address("gateway-http"));
    (up, http)
}

/// `pastebin ARGS`, with the client's journal in `state`, standard input closed.
pub(crate) async fn pastebin(args: &[&str], state: &Path) -> Output {
    tokio::process::Command::new(testbed_binary())
        .args(args)
        .env("PASTEBIN_STATE_DIR", state)
        .env_remove("PASTEBIN_CONFIG")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .expect("pastebin runs")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operators_expiry_choices_are_all_the_page_offers_and_the_api_takes_and_limits_says_so() {
    let data = tempfile::tempdir().unwrap();
    let policy = [
        "--expiry-choices",
        "10m,1h,1d",
        "--default-expiry",
        "1h",
        "--allow-never-expire",
        "--max-content-bytes",
        "2048",
        "--create-rate-limit",
        "100/min",
    ];
    let (_up, http) = start_up(data.path(), &policy).await;

    let (_, page) = read(&format!("{http}/"), "text/html").await;
    let offered: Vec<&str> = page
        .split("<option value=\"")
        .skip(1)
        .filter_map(|o| o.split('"').next())
        .filter(|v| v.parse::<u64>().is_ok())
        .collect();
    assert_eq!(offered, ["600", "3600", "86400", "0"], "exactly the operator's choices, then never");
    assert!(page.contains("<option value=\"3600\" selected>1 hour</option>"), "the default is selected");
    assert!(page.contains("Up to 2 KiB per paste."), "the size limit is shown before anyone pastes");

    let (status, body, _) = create(&http, &new_key(), json!({ "content": "x", "expires_in_seconds": 7200 })).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let expected = "expires_in_seconds must be one of 600 (10m), 3600 (1h), 86400 (1d) or 0 (never)";
    assert_eq!(serde_json::from_str::<Value>(&body).unwrap()["error"]["message"], expected, "{body}");
    let (status, body, _) = create(&http, &new_key(), json!({ "content": "default" })).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let created: Value = serde_json::from_str(&body).unwrap();
    let expires = chrono::DateTime::parse_from_rfc3339(created["expires_at"].as_str().unwrap()).unwrap();
    let hour = expires.signed_duration_since(chrono::Utc::now()).num_seconds();
    assert!((3000..=3600).contains(&hour), "the default is an hour: {hour} s");
    let (_, page) = read(&format!("{http}/{}", created["id"].as_str().unwrap()), "text/html").await;
    assert!(page.contains("expires <time"), "the page shows when it expires");
    let (status, body, _) = create(&http, &new_key(), json!({ "content": "forever", "expires_in_seconds": 0 })).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let forever = serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_owned();
    let (_, page) = read(&format!("{http}/{forever}"), "text/html").await;
    assert!(page.contains("never expires"), "{page}");

    let (status, limits) = read(&format!("{http}/api/v1/limits"), "application/json").await;
    assert_eq!(status, StatusCode::OK);
    let limits: Value = serde_json::from_str(&limits).unwrap();
    assert_eq!(
        limits,
        json!({
            "max_content_bytes": 2048,
            "expiry": {
                "choices_seconds": [600, 3600, 86400],
                "offered_seconds": [600, 3600, 86400, 0],
                "default_seconds": 3600,
                "max_seconds": 31536000,
                "never_allowed": true
            },
            "burn_after_reading": true,
            "encryption": true,
            "create_tokens_required": false,
            "create_rate_limit": { "count": 100, "period_seconds": 60 },
            "report_reasons": ["spam", "malware", "illegal", "personal-data", "other"]
        })
    );

    // The client reads the limits and refuses locally, in the server's words.
    let state = tempfile::tempdir().unwrap();
    let file = state.path().join("note.txt");
    std::fs::write(&file, "a note").unwrap();
    let file = file.to_str().unwrap();
    let refused = pastebin(&["paste", file, "--server", &http, "--expires", "2h"], state.path()).await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains(expected), "{stderr}");
    let large = state.path().join("large.txt");
    std::fs::write(&large, "x".repeat(3000)).unwrap();
    let refused = pastebin(&["paste", large.to_str().unwrap(), "--server", &http], state.path()).await;
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("content exceeds the limit of 2048 bytes"), "{stderr}");
    let pastes = pastebin(&["pastes", "--all", "--json", "--server", &http], state.path()).await;
    assert!(pastes.stdout.is_empty(), "nothing was journaled: {}", String::from_utf8_lossy(&pastes.stdout));
    // Without --expires the server's default (1h) is asked for, which it takes.
    let pasted = pastebin(&["paste", file, "--server", &http], state.path()).await;
    assert!(pasted.status.success(), "{}", String::from_utf8_lossy(&pasted.stderr));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pastebin_get_round_trips_text_and_binary_and_asks_before_a_burn() {
    let data = tempfile::tempdir().unwrap();
    let (_up, http) = start_up(data.path(), &[]).await;
    let state = tempfile::tempdir().unwrap();
    let text = "héllo\n\tworld\n";
    let (_, body, _) = create(&http, &new_key(), json!({ "content": text, "language": "rust" })).await;
    let text_id = serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_owned();
    let got = pastebin(&["get", &format!("{http}/{text_id}"), "--info"], state.path()).await;
    assert!(got.status.success(), "{}", String::from_utf8_lossy(&got.stderr));
    assert_eq!(got.stdout, text.as_bytes());
    let info = String::from_utf8_lossy(&got.stderr);
    assert!(info.contains("expires: ") && info.contains("language: rust"), "{info}");

    let bytes: Vec<u8> = (0..=255u8).cycle().take(5000).collect();
    let binary = Client::new()
        .post(format!("{http}/api/v1/pastes"))
        .header("Idempotency-Key", new_key())
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .body(bytes.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(binary.status(), StatusCode::CREATED);
    let binary_id = binary.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let out = state.path().join("copy.bin");
    let got = pastebin(&["get", &binary_id, "--server", &http, "-o", out.to_str().unwrap()], state.path()).await;
    assert!(got.status.success(), "{}", String::from_utf8_lossy(&got.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), bytes, "the bytes, exactly");

    let (_, body, _) = create(&http, &new_key(), json!({ "content": "once", "burn_after_reading": true })).await;
    let burn_id = serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_owned();
    let asked = pastebin(&["get", &burn_id, "--server", &http], state.path()).await;
    let stderr = String::from_utf8_lossy(&asked.stderr);
    assert_eq!(asked.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("deleted when it is read") && stderr.contains("--yes"), "{stderr}");
    let (status, _) = read(&format!("{http}/api/v1/pastes/{burn_id}"), "application/json").await;
    assert_eq!(status, StatusCode::OK, "not burned by the refused get (this read burns it now)");
    let (_, body, _) = create(&http, &new_key(), json!({ "content": "once more", "burn_after_reading": true })).await;
    let burn_id = serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_owned();
    let yes = pastebin(&["get", &burn_id, "--server", &http, "--yes"], state.path()).await;
    assert!(yes.status.success(), "{}", String::from_utf8_lossy(&yes.stderr));
    assert_eq!(yes.stdout, b"once more");
    let again = pastebin(&["get", &burn_id, "--server", &http, "--yes"], state.path()).await;
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("no such paste"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn takedowns_and_reports_are_counted_where_p_runs() {
    let data = tempfile::tempdir().unwrap();
    let (up, http) = start_up(data.path(), &[]).await;
    let (_, body, _) = create(&http, &new_key(), json!({ "content": "counted" })).await;
    let id = serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_owned();
    let report = Client::new().post(format!("{http}/api/v1/pastes/{id}/reports")).json(&json!({ "reason": "illegal" }));
    assert_eq!(report.send().await.unwrap().status(), StatusCode::CREATED);
    // The dashboard shows the open report once the sweeper's next round
    // (every 5 s) has asked P.
    let admin = format!("http://{}", up.address("admin"));
    status_when(&admin, "the dashboard counts the open report", |status| status["open_reports"] == 1).await;
    let state = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_str().unwrap();
    let taken = pastebin(
        &["ctl", "--data-dir", data_dir, "takedown", &format!("{http}/{id}"), "--reason", "court order"],
        state.path(),
    )
    .await;
    assert!(taken.status.success(), "{}", String::from_utf8_lossy(&taken.stderr));
    status_when(&admin, "the takedown closes the report on the dashboard", |status| status["open_reports"] == 0).await;
    let metrics = reqwest::get(format!("http://{}/metrics", up.address("admin"))).await.unwrap().text().await.unwrap();
    assert!(metrics.lines().any(|l| l == "pastebin_takedowns_total 1"), "{metrics}");
    assert!(metrics.lines().any(|l| l == r#"pastebin_reports_total{reason="illegal"} 1"#), "{metrics}");
    let (status, body) = read(&format!("{http}/raw/{id}"), "*/*").await;
    assert_eq!((status, body.contains("court order")), (StatusCode::GONE, true), "{body}");
    assert!(up.logs().contains("paste taken down by the operator"), "the audit line");
}

/// What a user error looks like with RUST_BACKTRACE=1: one line, no frames.
fn assert_no_backtrace(output: &Output, expect: &str) {
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(stderr.contains(expect), "{stderr}");
    for frame in ["Stack backtrace", "stack backtrace", "backtrace::", "0: ", "std::rt::lang_start"] {
        assert!(!stderr.contains(frame), "a backtrace was printed:\n{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_user_error_prints_a_backtrace_even_with_rust_backtrace_set() {
    let data = tempfile::tempdir().unwrap();
    let (_up, _) = start_up(data.path(), &[]).await;
    let run = |args: Vec<String>| async move {
        tokio::process::Command::new(testbed_binary())
            .args(args)
            .env("RUST_BACKTRACE", "1")
            .env_remove("PASTEBIN_CONFIG")
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .expect("pastebin runs")
    };
    let second = tokio::time::timeout(Duration::from_secs(120), run(up_args(data.path(), &[])))
        .await
        .expect("a second up on one data directory stops at once");
    assert_no_backtrace(&second, "is in use by pid");
    let other = tempfile::tempdir().unwrap();
    let contradictory = run(up_args(other.path(), &["--expiry-choices", "10m,1h", "--default-expiry", "1d"])).await;
    assert_no_backtrace(&contradictory, "the default expiry 1d is not allowed");
    let get = run(vec!["get".into(), "http://127.0.0.1:9/00000000000000".into()]).await;
    assert_no_backtrace(&get, "cannot reach http://127.0.0.1:9");
    let help = run(vec!["--help".into()]).await;
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("Run the gateway") && !help.contains("Boxed"), "{help}");
}

/// How many rows a P database holds for `id`, in any state.
async fn rows_of(url: &str, id: &str) -> i64 {
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(url).await.expect("the shard's database opens");
    sqlx::query_scalar("SELECT COUNT(*) FROM pastes WHERE id = $1").bind(id).fetch_one(&pool).await.unwrap()
}

/// The write sent during the move, whose caller gives up.
#[derive(Clone, Copy, PartialEq)]
enum LateWrite {
    Report,
    Takedown,
}

/// Reports and takedowns are stored on the paste's row, so they move with
/// its slot (docs/operations.md#reports-and-takedowns). One more report or
/// takedown, sent while ctl waits after its copy, has a caller that gives
/// up while the source's write is still queued (the source is on SQLite
/// with each group commit held 3 s before it begins): it holds its write
/// permit until the write is done, so the move's freeze waits for it and
/// copies its row (docs/design.md#moving-slots). The late write is the only
/// one in flight: a later write held to its commit would hold the freeze
/// back for it too, so each kind has its own test.
async fn reports_and_takedowns_move_with_their_slots(late: LateWrite) {
    let dir = tempfile::tempdir().unwrap();
    let options = ClusterOptions {
        empty_paste_shards: 1,
        paste_database_urls: vec![sqlite_url(dir.path(), "p0.db")],
        ..Default::default()
    };
    let mut cluster = Cluster::start(options).await;
    // Three pastes in the slots that move (128-255).
    let mut ids = Vec::new();
    for content in ["reported", "taken down before the move", "taken down during the move or not"] {
        let (status, body, _) = create(&cluster.http, &key_on_paste_shard(1), json!({ "content": content })).await;
        assert_eq!(status, StatusCode::CREATED, "{body}");
        ids.push(serde_json::from_str::<Value>(&body).unwrap()["id"].as_str().unwrap().to_owned());
    }
    let [reported, taken, taken_late] = [&ids[0], &ids[1], &ids[2]];
    for reason in ["spam", "malware"] {
        let answer = Client::new()
            .post(format!("{}/api/v1/pastes/{reported}/reports", cluster.http))
            .json(&json!({ "reason": reason }))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::CREATED);
    }
    let (exit, out, err) = ctl(&cluster, &["takedown", taken, "--reason", "before the move"]).await;
    assert_eq!(exit, pastebin_ctl::Exit::Ok, "{out}{err}");

    let hold = format!("{}=sleep:3000", pastebin_runtime::failpoints::BEFORE_GROUP_COMMIT);
    cluster.pastes[0].restart(&[("PASTEBIN_FAILPOINTS", hold.as_str())], &["paste-service"]).await;
    let p = cluster.paste_addresses.clone();
    let go = dir.path().join("copied");
    let wait = format!("{}=wait:{}", failpoint::AFTER_COPY, go.display());
    let mover = ctl_reshard_command(&cluster, &move_args("paste", &p[0], &p[1], HIGH), &wait).spawn().unwrap();
    reached(&go).await;
    // Copied but not yet moved: the target holds the rows, the source still
    // owns them, and the paste is listed once, by its owner.
    let (listed_ids, listed) = reported_ids(&cluster, &[]).await;
    assert_eq!(listed_ids, [reported.as_str()], "listed once mid-move: {listed}");
    assert_eq!(listed["open_reports"], 2, "{listed}");
    assert_eq!(rows_of(&cluster.paste_database_urls[1], reported).await, 1, "the target holds the copy");
    let impatient = cluster.paste_client(0).with_deadline(tokio::time::Instant::now() + Duration::from_millis(500));
    let gave_up = match late {
        LateWrite::Takedown => {
            impatient.take_down(&PasteId::parse(taken_late).unwrap(), "during the move", "bob").await.is_err()
        }
        LateWrite::Report => impatient
            .report(&PasteId::parse(reported).unwrap(), "personal-data", Some("during the move"))
            .await
            .is_err(),
    };
    assert!(gave_up, "the caller gives up before the write commits");
    std::fs::write(&go, "").unwrap();
    let (ok, output) = finished(mover).await;
    assert!(ok && output.contains("done: slots 128-255 moved"), "{output}");
    cluster.pastes[0].forget_flag("--slots");
    cluster.pastes[0].restart(&[("PASTEBIN_FAILPOINTS", "")], &["paste-service"]).await;

    // The reported paste is listed once, from its new shard, with every report.
    let (listed_ids, listed) = reported_ids(&cluster, &[]).await;
    assert_eq!(listed_ids, [reported.as_str()], "listed once: {listed}");
    let (count, reasons) = match late {
        LateWrite::Report => (3, vec!["personal-data", "malware", "spam"]),
        LateWrite::Takedown => (2, vec!["malware", "spam"]),
    };
    assert_eq!((&listed["open_reports"], &listed["pastes"][0]["reports"]), (&json!(count), &json!(count)), "{listed}");
    let listed_reasons: Vec<&str> =
        listed["pastes"][0]["recent"].as_array().unwrap().iter().map(|r| r["reason"].as_str().unwrap()).collect();
    assert_eq!(listed_reasons, reasons, "{listed}");
    // The takedowns hold on the new shard: 410 with the reason, on the API and the page.
    let mut taken_down = vec![(taken, "before the move")];
    if late == LateWrite::Takedown {
        taken_down.push((taken_late, "during the move"));
    }
    for (id, reason) in taken_down {
        let (status, body) = read(&format!("{}/api/v1/pastes/{id}", cluster.http), "application/json").await;
        assert_eq!((status, body.contains(reason)), (StatusCode::GONE, true), "{id}: {body}");
        let (status, page) = read(&format!("{}/{id}", cluster.http), "text/html").await;
        assert_eq!(status, StatusCode::GONE, "{id}: {page}");
        assert!(page.contains("removed by the operator") && page.contains(reason), "{id}: {page}");
    }
    for id in &ids {
        assert_eq!(rows_of(&cluster.paste_database_urls[0], id).await, 0, "the source holds nothing of {id}");
        assert_eq!(rows_of(&cluster.paste_database_urls[1], id).await, 1, "the target holds {id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reports_and_takedowns_move_with_their_slots_and_a_takedown_whose_caller_gave_up_is_kept() {
    reports_and_takedowns_move_with_their_slots(LateWrite::Takedown).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reports_and_takedowns_move_with_their_slots_and_a_report_whose_caller_gave_up_is_kept() {
    reports_and_takedowns_move_with_their_slots(LateWrite::Report).await;
}
