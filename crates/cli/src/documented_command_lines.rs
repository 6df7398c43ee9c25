//! Every `pastebin …` command line the docs, the READMEs, the deployment
//! recipes and the binary's own help texts show is parsed by the binary's
//! own argument parser (nothing runs): a flag the binary does not have, a
//! flag in the wrong place or a misspelled command fails here, not in a
//! reader's terminal (docs/testing.md#checking-the-docs).
//!
//! Inline mentions in prose (`` `pastebin ctl reshard` ``) may leave out
//! what the command needs and write placeholders (`--kind KIND`,
//! `[--days N]`, `add|list|revoke`); lines in code blocks are whole commands.

use std::path::{Path, PathBuf};

use clap::{error::ErrorKind, FromArgMatches};

/// A command line as documented, and where.
#[derive(Debug)]
struct Shown {
    place: String,
    words: Vec<String>,
    /// An inline mention: it may name a command without all it needs.
    fragment: bool,
}

fn repository() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The documents whose command lines must parse.
fn documents() -> Vec<PathBuf> {
    let root = repository();
    let mut files = vec![root.join("README.md"), root.join("deploy/systemd/pastebin.service")];
    for dir in ["docs", "crates"] {
        for entry in std::fs::read_dir(root.join(dir)).unwrap().map(Result::unwrap) {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            } else if path.join("README.md").is_file() {
                files.push(path.join("README.md"));
            }
        }
    }
    files
}

/// Shell words of `line`, quotes removed; a shell operator ends the command.
fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, c) if c.is_whitespace() => {
                if started || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                started = false;
            }
            (None, c) => word.push(c),
        }
    }
    if started || !word.is_empty() {
        words.push(word);
    }
    let operator = |w: &String| {
        ["|", "||", "&&", ";", "&", "#", "<"].contains(&w.as_str()) || w.starts_with(['>', ')']) || w.starts_with("2>")
    };
    let end = words.iter().position(operator).unwrap_or(words.len());
    words.truncate(end);
    without_expansions(words)
}

/// The words with the shell's expansions read as a reader fills them in:
/// a variable or `$(...)` after a flag that takes a value is a value, and
/// anywhere else it stands for flags of its own (`$SHARDS`, `$(tls ctl)`)
/// and is left out, as is everything a `$(...)` encloses.
fn without_expansions(words: Vec<String>) -> Vec<String> {
    let mut kept: Vec<String> = Vec::new();
    let mut depth = 0usize;
    for word in words {
        let opened = word.matches("$(").count();
        let closed = word.matches(')').count();
        let expansion = depth > 0 || opened > 0 || word.starts_with('$');
        depth = (depth + opened).saturating_sub(closed);
        if !expansion {
            kept.push(word);
        } else if depth == 0 && kept.last().is_some_and(|flag| flag.starts_with("--") && !flag.contains('=')) {
            kept.push("EXPANDED".to_owned());
        }
    }
    kept
}

/// The command lines in `text` that start with `pastebin SUBCOMMAND` (or a
/// flag of `pastebin`'s own): `pastebin` alone is often a name or a path.
fn commands_in(text: &str, subcommands: &[String], place: &str, fragment: bool, found: &mut Vec<Shown>) {
    let bytes = text.as_bytes();
    for (at, _) in text.match_indices("pastebin ") {
        let before = at.checked_sub(1).map(|i| bytes[i] as char);
        if !before.is_none_or(|c| c.is_whitespace() || "/`($;&|=".contains(c)) {
            continue;
        }
        // A command quoted inside another (`--health-cmd '… pastebin healthcheck …'`) ends with its quote.
        let quote = ['\'', '"'].into_iter().find(|q| text[..at].matches(*q).count() % 2 == 1);
        let rest = &text[at..];
        let words = shell_words(quote.and_then(|q| rest.split(q).next()).unwrap_or(rest));
        let Some(first) = words.get(1) else { continue };
        if !subcommands.contains(first) {
            continue;
        }
        found.push(Shown { place: place.to_owned(), words, fragment });
    }
}

/// Every command line of a Markdown file: each line of a code block (with
/// `\` continuations joined) and each inline code span.
fn markdown_commands(path: &Path, subcommands: &[String], found: &mut Vec<Shown>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let name = path.strip_prefix(repository()).unwrap_or(path).display().to_string();
    let mut in_block = false;
    let mut joined = String::new();
    for (number, line) in text.lines().enumerate() {
        let place = format!("{name}:{}", number + 1);
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            if let Some(continued) = line.strip_suffix('\\') {
                joined.push_str(continued);
                continue;
            }
            joined.push_str(line);
            let command = std::mem::take(&mut joined);
            commands_in(command.trim_start().trim_start_matches("$ "), subcommands, &place, false, found);
        } else {
            for span in line.split('`').skip(1).step_by(2) {
                commands_in(&span.replace("\\|", "|"), subcommands, &place, true, found);
            }
        }
    }
}

/// The systemd unit's `ExecStart=` (continuations joined).
fn unit_commands(path: &Path, subcommands: &[String], found: &mut Vec<Shown>) {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let joined = text.replace("\\\n", " ");
    for line in joined.lines().filter(|line| line.starts_with("ExecStart=")) {
        commands_in(line, subcommands, &path.display().to_string(), false, found);
    }
}

/// Every `pastebin …` code span in the help texts of `command` and below.
fn help_commands(command: &clap::Command, subcommands: &[String], found: &mut Vec<Shown>) {
    let mut texts: Vec<String> = [command.get_about(), command.get_long_about(), command.get_after_help()]
        .into_iter()
        .flatten()
        .map(ToString::to_string)
        .collect();
    for arg in command.get_arguments() {
        texts.extend([arg.get_help(), arg.get_long_help()].into_iter().flatten().map(ToString::to_string));
    }
    let place = format!("`pastebin {} --help`", command.get_name());
    for text in texts {
        for span in text.split('`').skip(1).step_by(2) {
            commands_in(span, subcommands, &place, true, found);
        }
    }
    for inner in command.get_subcommands() {
        help_commands(inner, subcommands, found);
    }
}

/// Usage notation read as one of the lines it stands for: `[--days N]` is
/// `--days N`, `key|paste` is `key`, an elision is left out.
fn one_reading(words: &[String]) -> Vec<String> {
    words
        .iter()
        .filter(|w| !["...", "…"].contains(&w.as_str()))
        .map(|w| {
            let w = if w.starts_with("[-") || w.starts_with("[<") { &w[1..] } else { w.as_str() };
            let w = if w.ends_with(']') && !w.contains('[') { &w[..w.len() - 1] } else { w };
            let w = if w.contains('|') && !w.contains("://") { w.split('|').next().unwrap_or(w) } else { w };
            w.to_owned()
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// A value a document writes for the reader to fill in: `KIND`, `<id>`, `FIRST-LAST`.
fn placeholder(value: &str) -> bool {
    let caps = value.chars().any(|c| c.is_ascii_uppercase())
        && value.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || "_-,.".contains(c));
    caps || (value.starts_with('<') && value.ends_with('>'))
}

/// Whether the parser's answer to a documented line is acceptable.
fn accepted(shown: &Shown, error: &clap::Error) -> bool {
    let value = || error.get(clap::error::ContextKind::InvalidValue).map(ToString::to_string).unwrap_or_default();
    match error.kind() {
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion => true,
        ErrorKind::MissingRequiredArgument
        | ErrorKind::MissingSubcommand
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => shown.fragment,
        ErrorKind::InvalidValue | ErrorKind::ValueValidation => placeholder(&value()),
        _ => false,
    }
}

/// Why `words` do not parse as a documented line, if they do not.
fn refusal(shown: &Shown) -> Option<String> {
    let words = one_reading(&shown.words);
    let matches = match crate::command().try_get_matches_from(&words) {
        Ok(matches) => matches,
        Err(error) if accepted(shown, &error) => return None,
        Err(error) => return Some(error.render().to_string()),
    };
    crate::Cli::from_arg_matches(&matches).err().map(|error| error.render().to_string())
}

fn everything_shown() -> Vec<Shown> {
    let cli = crate::command();
    // What may follow `pastebin`: a command, or a flag of its own (`pastebin --version`).
    let subcommands: Vec<String> = cli
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .chain(cli.get_arguments().filter_map(|a| a.get_long()).map(|long| format!("--{long}")))
        .chain(["--help", "--version"].map(String::from))
        .collect();
    let mut found = Vec::new();
    for path in documents() {
        if path.extension().is_some_and(|e| e == "service") {
            unit_commands(&path, &subcommands, &mut found);
        } else {
            markdown_commands(&path, &subcommands, &mut found);
        }
    }
    help_commands(&cli, &subcommands, &mut found);
    found
}

#[test]
fn every_command_line_the_docs_and_the_help_show_parses() {
    let shown = everything_shown();
    assert!(shown.len() > 100, "the docs show {} command lines: is the scan broken?", shown.len());
    let refused: Vec<String> = shown
        .iter()
        .filter_map(|shown| refusal(shown).map(|why| format!("{}: `{}`\n{why}", shown.place, shown.words.join(" "))))
        .collect();
    assert!(refused.is_empty(), "{} documented command line(s) do not parse:\n\n{}", refused.len(), refused.join("\n"));
}

#[test]
fn the_scan_finds_code_blocks_inline_spans_units_and_help_texts() {
    let shown = everything_shown();
    let has = |place: &str, line: &str| {
        shown.iter().any(|shown| shown.place.starts_with(place) && shown.words.join(" ").starts_with(line))
    };
    assert!(has("docs/security.md", "pastebin ctl tokens add alice --file /etc/pastebin/create-tokens"));
    assert!(has("docs/configuration.md", "pastebin ctl tokens add|list|revoke --file PATH"));
    assert!(has("`pastebin gateway --help`", "pastebin ctl tokens add|list|revoke --file PATH"));
    assert!(shown.iter().any(|shown| shown.place.ends_with("pastebin.service")), "the systemd unit's ExecStart");
    assert!(has("docs/deployment.md", "pastebin up"), "the container run line");
}

#[test]
fn a_line_the_binary_rejects_is_caught_and_usage_notation_is_read() {
    let line = |text: &str, fragment: bool| Shown { place: "t".into(), words: shell_words(text), fragment };
    assert!(refusal(&line("pastebin ctl tokens add alice --file F", false)).is_none());
    assert!(refusal(&line("pastebin ctl tokens --file F add|list|revoke", true)).is_none());
    assert!(refusal(&line("pastebin up --no-such-flag", false)).is_some());
    assert!(refusal(&line("pastebin ctl reshard --kind KIND --from A --to B --status", true)).is_none());
    assert!(refusal(&line("pastebin ctl reshard --kind kettle --from A --to B --status", true)).is_some());
    assert!(refusal(&line("pastebin ctl reshard", true)).is_none(), "a mention of the command");
    assert!(refusal(&line("pastebin ctl reshard", false)).is_some(), "a whole command in a code block");
    assert!(refusal(&line("pastebin ctl certs --out DIR [--san NAME,...] [--days N]", true)).is_none());
    assert_eq!(shell_words("pastebin paste 'a b' | wc -l"), ["pastebin", "paste", "a b"]);
}
