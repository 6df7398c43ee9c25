//! Driving the system Chromium from the tests: `playwright-core` scripts in
//! tests/browser (e2e.mjs), run phase by phase against a real deployment.
//!
//! Needs node (>= 20), /usr/bin/chromium (or $CHROMIUM) and
//! tests/browser/node_modules (`npm ci --prefix tests/browser`); a missing
//! one fails the test with the line that installs it.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::cluster::Cluster;
use serde_json::Value;

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("tests/ sits in the workspace").to_path_buf()
}

pub fn browser_dir() -> PathBuf {
    workspace_root().join("tests/browser")
}

pub fn chromium() -> String {
    std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into())
}

/// Fails with the install line for whatever is missing.
pub fn require_tools() {
    let node = Command::new("node").arg("--version").output();
    assert!(
        node.as_ref().is_ok_and(|o| o.status.success()),
        "node is missing: install it with `apt-get install -y nodejs npm` (node >= 20)"
    );
    assert!(
        Path::new(&chromium()).exists(),
        "{} is missing: install it with `apt-get install -y chromium` (or set CHROMIUM)",
        chromium()
    );
    if !browser_dir().join("node_modules/playwright-core").exists() {
        let status = Command::new("npm").args(["ci", "--no-audit", "--no-fund"]).current_dir(browser_dir()).status();
        assert!(
            status.is_ok_and(|s| s.success()),
            "playwright-core is missing and `npm ci` failed: run `npm ci --prefix tests/browser`"
        );
    }
}

/// Runs one phase of e2e.mjs and returns its `RESULT` object.
pub async fn run_phase(cluster: &Cluster, args: &[&str]) -> Value {
    run_script_phase(cluster, "e2e.mjs", args).await
}

/// Runs one phase of the browser script `script` (in tests/browser) and
/// returns its `RESULT` object.
pub async fn run_script_phase(cluster: &Cluster, script: &str, args: &[&str]) -> Value {
    let artifacts = workspace_root().join("target/test-artifacts/browser");
    // Chromium outlives a killed node; the tag ends both when this phase ends, pass or fail.
    let browser = crate::process_tag::ProcessTag::new();
    let output = tokio::process::Command::new("node")
        .arg(script)
        .args(args)
        .current_dir(browser_dir())
        .env("BASE_URL", &cluster.http)
        .env("ARTIFACTS", &artifacts)
        .env("CHROMIUM", chromium())
        .env(browser.env().0, browser.env().1)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(std::time::Duration::from_secs(180), output)
        .await
        .expect("the browser phase finishes within 3 minutes")
        .expect("node runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "browser phase {args:?} failed ({}):\n{stdout}\n{stderr}\ngateway log:\n{}",
        output.status,
        cluster.gateway.logs()
    );
    let line = stdout.lines().rev().find_map(|l| l.strip_prefix("RESULT ")).expect("the phase printed its RESULT");
    serde_json::from_str(line).expect("RESULT is JSON")
}
