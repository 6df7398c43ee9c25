//! Durations in and out, and aligned tables.

use std::time::Duration;

/// Parses `60s`, `2m`, `1h`, `1d`, `500ms` or a bare number of seconds.
pub fn parse_duration(raw: &str) -> Result<Duration, String> {
    let raw = raw.trim();
    let split = raw.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(raw.len());
    let (number, unit) = raw.split_at(split);
    let value: f64 = number.parse().map_err(|_| format!("`{raw}` is not a duration (try 60s, 2m, 1h)"))?;
    let seconds = match unit.trim() {
        "" | "s" | "sec" | "secs" => value,
        "ms" => value / 1000.0,
        "m" | "min" | "mins" => value * 60.0,
        "h" => value * 3600.0,
        "d" => value * 86_400.0,
        other => return Err(format!("unknown unit `{other}` in `{raw}` (use ms, s, m, h or d)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|_| format!("`{raw}` is out of range"))
}

/// A duration for people: `850ms`, `12.3s`, `2m03s`, `1h02m`, `3d04h`.
pub fn age(seconds: f64) -> String {
    let seconds = seconds.max(0.0);
    if seconds < 1.0 {
        return format!("{}ms", (seconds * 1000.0).round() as u64);
    }
    if seconds < 60.0 {
        return format!("{seconds:.1}s");
    }
    let s = seconds.round() as u64;
    match s {
        0..=3599 => format!("{}m{:02}s", s / 60, s % 60),
        3600..=86_399 => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d{:02}h", s / 86_400, (s % 86_400) / 3600),
    }
}

/// Seconds between two instants as f64 (negative clamps to zero).
pub fn seconds_between(earlier: chrono::DateTime<chrono::Utc>, later: chrono::DateTime<chrono::Utc>) -> f64 {
    (later - earlier).num_milliseconds().max(0) as f64 / 1000.0
}

/// `text` as a terminal may show it: every control character (C0 with
/// ESC, BEL, CR and LF, DEL, C1) and every bidirectional override or
/// isolate (U+202A–U+202E, U+2066–U+2069, and the marks U+061C, U+200E,
/// U+200F) written as a visible `\u{…}` escape. What an anonymous reporter
/// typed cannot move the cursor, retitle the window, ring the bell or turn
/// the operator's line around (docs/security.md#reports).
pub fn terminal_safe(text: &str) -> std::borrow::Cow<'_, str> {
    let unsafe_char = |c: char| {
        c.is_control()
            || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{061C}' | '\u{200E}' | '\u{200F}')
    };
    if !text.contains(unsafe_char) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut safe = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if unsafe_char(c) {
            safe.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            safe.push(c);
        }
    }
    std::borrow::Cow::Owned(safe)
}

/// Columns padded to their widest cell, two spaces apart; numbers are not
/// special-cased (every column is left-aligned, which reads fine for ids).
/// Every cell is [`terminal_safe`]: a table never writes a control character.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let rows: Vec<Vec<String>> =
        rows.iter().map(|row| row.iter().map(|cell| terminal_safe(cell).into_owned()).collect()).collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut text = String::new();
        for (i, (cell, width)) in cells.iter().zip(&widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                text.push_str(&format!("{cell:<width$}  "));
            }
        }
        text.trim_end().to_owned() + "\n"
    };
    let mut text = line(header.to_vec());
    for row in &rows {
        text.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("60"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("5 fortnights").is_err());
    }

    #[test]
    fn ages_read_like_people_write_them() {
        assert_eq!(age(0.25), "250ms");
        assert_eq!(age(12.34), "12.3s");
        assert_eq!(age(123.0), "2m03s");
        assert_eq!(age(3720.0), "1h02m");
        assert_eq!(age(3.0 * 86_400.0 + 4.0 * 3600.0), "3d04h");
    }

    #[test]
    fn tables_align_columns() {
        let text = table(&["AGE", "KEY"], &[vec!["2m03s".into(), "k1".into()], vec!["1s".into(), "k2".into()]]);
        assert_eq!(text, "AGE    KEY\n2m03s  k1\n1s     k2\n");
    }

    #[test]
    fn control_and_bidirectional_characters_are_shown_not_obeyed() {
        let hostile = "a\u{1b}]0;owned\u{7}b\u{1b}[2Jc\u{9b}31m\u{202e}desab\u{2066}x\u{2069}\r\nend\u{7f}";
        let safe = terminal_safe(hostile);
        assert_eq!(
            safe,
            "a\\u{1b}]0;owned\\u{7}b\\u{1b}[2Jc\\u{9b}31m\\u{202e}desab\\u{2066}x\\u{2069}\\u{d}\\u{a}end\\u{7f}"
        );
        assert!(!safe.chars().any(|c| c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c)), "{safe}");
        assert!(matches!(terminal_safe("plain é ✓"), std::borrow::Cow::Borrowed("plain é ✓")));
        let text = table(&["NOTE"], &[vec![hostile.into()]]);
        assert_eq!(text, format!("NOTE\n{safe}\n"), "every cell of a table");
    }
}
