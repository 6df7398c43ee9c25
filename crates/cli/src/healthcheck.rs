//! `pastebin healthcheck`: the container image's `HEALTHCHECK`. The image has
//! no shell and no HTTP client, so the binary asks its own admin listener.

use std::time::Duration;

/// Probes give up after this: a hung listener is an unhealthy one.
const TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, clap::Args)]
pub struct HealthcheckArgs {
    /// What to ask: `/healthz` (alive) or `/readyz` (able to work) of an admin listener.
    #[arg(long, default_value = "http://127.0.0.1:9090/healthz")]
    pub url: String,
}

/// Exit code 0 when the listener answers 2xx, else 1 with the reason on stderr.
pub async fn run(args: HealthcheckArgs) -> anyhow::Result<i32> {
    let client = reqwest::Client::builder().timeout(TIMEOUT).build()?;
    match client.get(&args.url).send().await {
        Ok(answer) if answer.status().is_success() => Ok(0),
        Ok(answer) => {
            let status = answer.status();
            eprintln!("{}: {status}: {}", args.url, answer.text().await.unwrap_or_default());
            Ok(1)
        }
        Err(error) => {
            eprintln!("{}: {error}", args.url);
            Ok(1)
        }
    }
}
