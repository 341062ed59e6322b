//! Kafka Connect config providers in a Debezium connector JSON: `${env:VAR}`,
//! `${file:/path.properties:key}` and `${directory:/dir:file}`, resolved when the JSON is read
//! (and in a `--kafka-config` worker file).

use std::path::{Path, PathBuf};

/// Resolves Kafka Connect config provider references `${env:VAR}`,
/// `${file:/path.properties:key}` and `${directory:/dir:file}`. Other `${...}` text (such as
/// `${routedByValue}`) is left alone. Errors never contain the resolved value.
pub(in crate::config) fn substitute_providers(
    value: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let inner = &after[..end];
        let resolved =
            match inner.split_once(':') {
                Some(("env", var)) => Some(env(var).ok_or_else(|| {
                    format!("${{env:{var}}}: environment variable {var} is not set")
                })?),
                Some(("file", spec)) => {
                    let (path, key) = spec.rsplit_once(':').ok_or_else(|| {
                        format!("${{file:{spec}}}: expected ${{file:/path/to/file.properties:key}}")
                    })?;
                    Some(read_properties_key(Path::new(path), key)?)
                }
                Some(("directory", spec)) => {
                    let (dir, file) = spec.rsplit_once(':').ok_or_else(|| {
                        format!("${{directory:{spec}}}: expected ${{directory:/dir:file}}")
                    })?;
                    let p = PathBuf::from(dir).join(file);
                    Some(
                        std::fs::read_to_string(&p)
                            .map_err(|e| format!("cannot read {}: {e}", p.display()))?,
                    )
                }
                Some((provider, _))
                    if !provider.is_empty()
                        && provider
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
                {
                    return Err(format!(
                    "config provider `{provider}` is not known; outboxd resolves ${{env:VAR}}, \
                     ${{file:/path.properties:key}} and ${{directory:/dir:file}}"
                ))
                }
                _ => None,
            };
        match resolved {
            Some(v) => out.push_str(&v),
            None => out.push_str(&rest[start..start + 2 + end + 1]),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Reads `key` from a Java properties file (`key=value`, `key: value` or `key value`;
/// `#`/`!` comments, `\` continuations and escapes: the `java-properties` crate).
fn read_properties_key(path: &Path, key: &str) -> Result<String, String> {
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut props = java_properties::read(std::io::BufReader::new(file))
        .map_err(|e| format!("{} is not a Java properties file: {e}", path.display()))?;
    props
        .remove(key)
        .ok_or_else(|| format!("{} has no key {key:?}", path.display()))
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn providers() {
        let env = |k: &str| (k == "PW").then(|| "s3cret".to_string());
        assert_eq!(substitute_providers("${env:PW}", &env).unwrap(), "s3cret");
        assert_eq!(
            substitute_providers("outbox.event.${routedByValue}", &env).unwrap(),
            "outbox.event.${routedByValue}"
        );
        assert_eq!(substitute_providers("a${b", &env).unwrap(), "a${b");
        let e = substitute_providers("${env:NOPE}", &env).unwrap_err();
        assert!(e.contains("NOPE is not set"), "{e}");
        let e = substitute_providers("${vault:secret/x:pw}", &env).unwrap_err();
        assert!(e.contains("`vault` is not known"), "{e}");

        let dir = std::env::temp_dir().join(format!("outboxd-props-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("db.properties");
        std::fs::write(&f, "# c\nuser = app\npassword=p:w=1\n").unwrap();
        let v = substitute_providers(&format!("${{file:{}:password}}", f.display()), &env).unwrap();
        assert_eq!(v, "p:w=1");
        let e =
            substitute_providers(&format!("${{file:{}:missing}}", f.display()), &env).unwrap_err();
        assert!(!e.contains("p:w=1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
