//! One database path for both backends: the shard stores speak portable SQL
//! through `sqlx::Any`, so every storage behaviour is the same code on
//! PostgreSQL and on SQLite and is tested on both. The schemas are not here:
//! each shard crate owns its migrations (`pastebin_keys::MIGRATIONS`,
//! `pastebin_pastes::MIGRATIONS`) and hands them to [`connect`].

use std::time::Duration;

use anyhow::Context;
use sqlx::{
    any::{install_default_drivers, AnyPoolOptions},
    migrate::Migrator,
    AnyPool,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

impl Backend {
    pub fn of_url(url: &str) -> anyhow::Result<Self> {
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            Ok(Self::Postgres)
        } else if url.starts_with("sqlite:") {
            Ok(Self::Sqlite)
        } else {
            anyhow::bail!("unsupported database URL scheme (use postgres:// or sqlite:)")
        }
    }
}

/// Opens a pool and runs `migrations`. SQLite files are created if missing and
/// put in WAL mode with `synchronous=FULL`: a commit the saga relies on must
/// survive a crash of the process and of the machine.
pub async fn connect(url: &str, max_connections: u32, migrations: &Migrator) -> anyhow::Result<AnyPool> {
    install_default_drivers();
    let backend = Backend::of_url(url)?;
    let url = match backend {
        Backend::Sqlite if !url.contains("mode=") => {
            format!("{url}{}mode=rwc", if url.contains('?') { '&' } else { '?' })
        }
        _ => url.to_owned(),
    };
    let options = AnyPoolOptions::new().max_connections(max_connections).acquire_timeout(Duration::from_secs(5));
    let options = match backend {
        Backend::Sqlite => options.after_connect(|conn, _meta| {
            Box::pin(async move {
                use sqlx::Executor;
                conn.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = FULL; PRAGMA busy_timeout = 5000;")
                    .await?;
                Ok(())
            })
        }),
        Backend::Postgres => options,
    };
    let pool = options.connect(&url).await.context("cannot connect to the database")?;
    migrations.run(&pool).await.context("cannot run database migrations")?;
    Ok(pool)
}
