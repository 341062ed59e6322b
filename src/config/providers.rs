//! Kafka's config providers, as Kafka Connect resolves them in connector and worker
//! configurations: `${env:VAR}` (`EnvVarConfigProvider`), `${file:/path.properties:key}`
//! (`FileConfigProvider`) and `${directory:/dir:file}` (`DirectoryConfigProvider`), the
//! `${provider:[path:]key}` references of Kafka's KIP-297 / KIP-632 / KIP-887. Both formats
//! that carry Kafka Connect text use them: a Debezium connector JSON's values
//! (`config::debezium`) and a `--kafka-config` worker file's (`config::kafka`). Unlike
//! Connect, outboxd needs no `config.providers` declaration: these three are always on.

use std::path::{Path, PathBuf};

/// `value` with every config provider reference replaced by what it names:
///
/// * `${env:VAR}`: the environment variable `VAR` (looked up with `env`); unset is an error;
/// * `${file:PATH:KEY}`: key `KEY` of the Java properties file `PATH` (split at the last
///   `:`, so `PATH` may hold colons); an unreadable file, not a properties file, or no such
///   key is an error;
/// * `${directory:DIR:FILE}`: the whole content of file `FILE` in directory `DIR`; an
///   unreadable file is an error;
/// * `${file:...}` / `${directory:...}` without the second `:` part: an error showing the
///   expected shape;
/// * `${NAME:...}` of any other provider name (letters, digits, `_`, `-`): an error naming
///   the three outboxd resolves (Connect would need the provider's class);
/// * any other `${...}` (such as the EventRouter's `${routedByValue}`) and a `${` without
///   `}` are left as they are.
///
/// Errors say which reference failed and why, never the resolved value (it is usually a
/// secret).
pub(super) fn substitute_providers(
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
