//! `pastebin ctl tokens add|list|revoke --file PATH`: the create tokens of
//! an instance started with `--require-create-token` (docs/security.md#create-tokens).
//! The file holds hashes only; `add` prints the new token once, and nothing
//! else ever prints one. Gateways re-read the file when it changes.

use std::{io::Write, path::PathBuf};

use pastebin_gateway::create_tokens::CreateTokenFile;

use crate::{format::table, CtlError, Exit};

#[derive(Debug, Clone, clap::Args)]
pub struct TokensArgs {
    /// The tokens file the gateways read (`--create-tokens-file`); created 0600
    /// if missing. Needed; before or after the action (`tokens add alice --file PATH`).
    // Global, so it goes where a user writes it; clap cannot require a
    // global flag, so `run` does.
    #[arg(long, env = "PASTEBIN_CREATE_TOKENS_FILE", global = true)]
    pub file: Option<PathBuf>,
    #[command(subcommand)]
    pub action: TokensAction,
}

#[derive(Debug, Clone, clap::Subcommand)]
pub enum TokensAction {
    /// Mint a token under LABEL and print it (the only time it is shown).
    Add { label: String },
    /// Labels and hash fingerprints of the tokens in the file.
    List,
    /// Remove the token labelled LABEL: creates with it are refused from the gateway's next read.
    Revoke { label: String },
}

pub fn run(args: &TokensArgs, out: &mut (dyn Write + Send)) -> Result<Exit, CtlError> {
    let path = args.file.as_ref().ok_or_else(|| {
        CtlError::Usage(
            "which tokens file? give --file PATH (or PASTEBIN_CREATE_TOKENS_FILE), the file the gateways' \
             --create-tokens-file names"
                .into(),
        )
    })?;
    let cannot = |what: &str, e: std::io::Error| CtlError::Failed(format!("cannot {what} {}: {e}", path.display()));
    let mut file = CreateTokenFile::load(path).map_err(|e| cannot("read", e))?;
    match &args.action {
        TokensAction::Add { label } => {
            let token = file.add(label).map_err(CtlError::Usage)?;
            file.save(path).map_err(|e| cannot("write", e))?;
            writeln!(out, "{token}")?;
        }
        TokensAction::List => {
            let rows: Vec<Vec<String>> =
                file.entries().iter().map(|entry| vec![entry.label.clone(), entry.fingerprint()]).collect();
            write!(out, "{}", table(&["LABEL", "SHA-256"], &rows))?;
        }
        TokensAction::Revoke { label } => {
            if !file.revoke(label) {
                return Err(CtlError::Failed(format!("no token labelled {label:?} in {}", path.display())));
            }
            file.save(path).map_err(|e| cannot("write", e))?;
            writeln!(out, "revoked {label}")?;
        }
    }
    Ok(Exit::Ok)
}
