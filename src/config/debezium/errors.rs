//! Kafka Connect's error handling keys (`errors.*`, the dead-letter queue). The retry and
//! log keys are reported as unused (`unused.rs`).

use super::Keys;
use crate::config::{ErrorPolicy, ErrorTolerance, KeyError};
use crate::router::parse_bool;

/// Kafka Connect's error policy keys: `errors.tolerance` (`none`, the default, or `all`),
/// `errors.deadletterqueue.topic.name`, `errors.deadletterqueue.context.headers.enable`
/// (default false, as in Connect). A dead-letter topic without `errors.tolerance=all` is
/// reported as unused (Connect does not write to it then either). The policy is checked
/// against the checkpoint topic once that is known ([`ErrorPolicy::validate`]).
pub(super) fn error_policy(keys: &mut Keys) -> Result<ErrorPolicy, KeyError> {
    let tolerance = match keys
        .take_nonempty("errors.tolerance")
        .map(|v| v.to_ascii_lowercase())
        .as_deref()
    {
        None | Some("none") => ErrorTolerance::None,
        Some("all") => ErrorTolerance::All,
        Some(other) => {
            return Err((
                "errors.tolerance".into(),
                format!("{other:?} is not none or all"),
            ))
        }
    };
    let topic_key = "errors.deadletterqueue.topic.name";
    let headers_key = "errors.deadletterqueue.context.headers.enable";
    let mut dead_letter_topic = keys.take_nonempty(topic_key);
    let context_headers = match keys.take_nonempty(headers_key) {
        Some(v) => parse_bool(&v).map_err(|m| (headers_key.to_string(), m))?,
        None => false,
    };
    if tolerance == ErrorTolerance::None && dead_letter_topic.take().is_some() {
        keys.ignore(
            topic_key,
            "used only with errors.tolerance=all (the default, none, stops the connector instead)",
        );
    }
    Ok(ErrorPolicy {
        tolerance,
        dead_letter_topic,
        context_headers,
    })
}
