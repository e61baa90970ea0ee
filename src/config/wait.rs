//! How long `clowder gate` waits for a decision: `90s`, `10m`, `1.5h` or `never`.

use std::time::Duration;

/// How long to wait for a decision: `90s`, `10m`, `1.5h`, `never`.
#[derive(Debug, Clone, PartialEq)]
pub struct Wait {
    pub limit: Option<Duration>,
    pub label: String,
}

impl std::str::FromStr for Wait {
    type Err = String;

    fn from_str(text: &str) -> Result<Wait, String> {
        let text = text.trim();
        if text == "never" {
            return Ok(Wait {
                limit: None,
                label: "never".into(),
            });
        }
        let bad = || format!("`{text}` is not a duration: use e.g. 90s, 10m, 1h or never");
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let (number, unit) = text.split_at(split);
        let number: f64 = number.parse().map_err(|_| bad())?;
        let scale = match unit {
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        let secs = number * scale;
        if !secs.is_finite() || secs <= 0.0 || secs > 366.0 * 86_400.0 {
            return Err(format!(
                "`{text}`: the timeout must be positive (or `never`)"
            ));
        }
        Ok(Wait {
            limit: Some(Duration::from_secs_f64(secs)),
            label: text.to_string(),
        })
    }
}
