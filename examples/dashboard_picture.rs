//! Draws the README's dashboard picture: six panels of the Grafana dashboard
//! (`docker/grafana/dashboards/outboxd.json`) from `/metrics` samples of a real run, with
//! plotters. There is no Grafana on the project's machines, so this is not a screenshot:
//! the same queries, evaluated by hand on the scraped samples (rates over 5 s).
//!
//! `cargo run --example dashboard_picture -- SAMPLES CONNECTOR OUT.png`, where SAMPLES is
//! what `scripts/dashboard-picture.sh` collects: `# t=<epoch ms>` before each scrape's text,
//! `# mark <name>` lines for the phases of the run (`kafka-stopped`, `kafka-started`).

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use plotters::prelude::*;

const FONT_PATHS: [&str; 2] = [
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// One scrape: seconds since the first, and every sample of the connector by series name
/// (labels other than the connector's folded into the name, e.g. `outboxd_errors_total{kind="transient"}`).
struct Scrape {
    t: f64,
    values: BTreeMap<String, f64>,
}

fn parse(text: &str, connector: &str) -> (Vec<Scrape>, Vec<(String, f64)>) {
    let mut scrapes: Vec<Scrape> = Vec::new();
    let mut marks = Vec::new();
    let mut t0: Option<f64> = None;
    let mut now = 0.0;
    let conn = format!("connector=\"{connector}\"");
    let name = format!("name=\"{connector}\"");
    for line in text.lines() {
        if let Some(ms) = line.strip_prefix("# t=") {
            let ms: f64 = ms.trim().parse().unwrap_or(0.0);
            let start = *t0.get_or_insert(ms);
            now = (ms - start) / 1000.0;
            scrapes.push(Scrape {
                t: now,
                values: BTreeMap::new(),
            });
        } else if let Some(m) = line.strip_prefix("# mark ") {
            marks.push((m.trim().to_string(), now));
        } else if !line.starts_with('#') && (line.contains(&conn) || line.contains(&name)) {
            let Some((series, value)) = line.rsplit_once(' ') else {
                continue;
            };
            let Ok(value) = value.parse::<f64>() else {
                continue;
            };
            let key = match series.split_once('{') {
                Some((n, labels)) => {
                    let kept: Vec<&str> = labels
                        .trim_end_matches('}')
                        .split(',')
                        .filter(|l| {
                            !l.starts_with("connector=")
                                && !l.starts_with("name=")
                                && !l.starts_with("plugin=")
                                && !l.starts_with("context=")
                        })
                        .collect();
                    if kept.is_empty() {
                        n.to_string()
                    } else {
                        format!("{n}{{{}}}", kept.join(","))
                    }
                }
                None => series.to_string(),
            };
            if let Some(s) = scrapes.last_mut() {
                s.values.insert(key, value);
            }
        }
    }
    (scrapes, marks)
}

/// A series' values over time.
fn gauge(scrapes: &[Scrape], key: &str) -> Vec<(f64, f64)> {
    scrapes
        .iter()
        .filter_map(|s| s.values.get(key).map(|v| (s.t, *v)))
        .collect()
}

/// A counter's per-second rate over `window` seconds (PromQL `rate`, by hand).
fn rate(scrapes: &[Scrape], key: &str, window: f64) -> Vec<(f64, f64)> {
    let points = gauge(scrapes, key);
    points
        .iter()
        .enumerate()
        .filter_map(|(i, &(t, v))| {
            let j = points[..i].iter().rposition(|&(t0, _)| t - t0 >= window)?;
            let (t0, v0) = points[j];
            Some((t, ((v - v0) / (t - t0)).max(0.0)))
        })
        .collect()
}

/// A panel's line: its legend, its points (seconds, value), its colour.
type Line = (String, Vec<(f64, f64)>, RGBColor);

struct Panel<'a> {
    title: &'a str,
    unit: &'a str,
    lines: Vec<Line>,
}

const BLUE: RGBColor = RGBColor(31, 119, 180);
const ORANGE: RGBColor = RGBColor(255, 127, 14);
const GREEN: RGBColor = RGBColor(44, 160, 44);
const PURPLE: RGBColor = RGBColor(148, 103, 189);

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [samples, connector, out] = args.as_slice() else {
        bail!("usage: dashboard_picture SAMPLES CONNECTOR OUT.png");
    };
    let text = std::fs::read_to_string(samples).with_context(|| format!("reading {samples}"))?;
    let (scrapes, marks) = parse(&text, connector);
    if scrapes.len() < 10 {
        bail!("{samples}: only {} scrapes", scrapes.len());
    }
    let Some(font) = FONT_PATHS.iter().find(|p| Path::new(p).exists()) else {
        bail!("no DejaVuSans.ttf; install Debian's fonts-dejavu-core");
    };
    let bytes: &'static [u8] = Box::leak(std::fs::read(font)?.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| anyhow::anyhow!("{font} is not a usable font"))?;

    let panels = [
        Panel {
            title: "Events per second",
            unit: "events/s",
            lines: vec![
                (
                    "read".into(),
                    rate(&scrapes, "outboxd_events_read_total", 5.0),
                    BLUE,
                ),
                (
                    "acknowledged by Kafka".into(),
                    rate(&scrapes, "outboxd_events_produced_total", 5.0),
                    ORANGE,
                ),
            ],
        },
        Panel {
            title: "Checkpoint lag",
            unit: "s",
            lines: vec![(
                "outboxd_checkpoint_lag_seconds".into(),
                gauge(&scrapes, "outboxd_checkpoint_lag_seconds"),
                BLUE,
            )],
        },
        Panel {
            title: "Ready / source connected",
            unit: "1 = yes",
            lines: vec![
                (
                    "ready".into(),
                    gauge(&scrapes, "outboxd_connector_ready"),
                    GREEN,
                ),
                (
                    "source connected".into(),
                    gauge(&scrapes, "outboxd_source_connected")
                        .into_iter()
                        .map(|(t, v)| (t, v * 0.95))
                        .collect(),
                    PURPLE,
                ),
            ],
        },
        Panel {
            title: "Outbox quiet for",
            unit: "s",
            lines: vec![(
                "outboxd_last_event_age_seconds".into(),
                gauge(&scrapes, "outboxd_last_event_age_seconds"),
                BLUE,
            )],
        },
        Panel {
            title: "Failures (cumulative)",
            unit: "failures",
            lines: vec![
                (
                    "transient".into(),
                    gauge(&scrapes, "outboxd_errors_total{kind=\"transient\"}"),
                    ORANGE,
                ),
                (
                    "restarts".into(),
                    gauge(&scrapes, "outboxd_connector_restarts_total"),
                    BLUE,
                ),
            ],
        },
        Panel {
            title: "Debezium MilliSecondsBehindSource",
            unit: "ms",
            lines: vec![(
                "debezium_metrics_MilliSecondsBehindSource".into(),
                gauge(&scrapes, "debezium_metrics_MilliSecondsBehindSource"),
                BLUE,
            )],
        },
    ];

    let root = BitMapBackend::new(out, (1500, 900)).into_drawing_area();
    root.fill(&WHITE)?;
    let (title, body) = root.split_vertically(70);
    title.draw_text(
        &format!(
            "outboxd: six panels of docker/grafana/dashboards/outboxd.json, connector {connector}"
        ),
        &("sans-serif", 22).into_text_style(&title),
        (20, 10),
    )?;
    let outage: Vec<(f64, f64)> = marks
        .iter()
        .filter(|(m, _)| m == "kafka-stopped")
        .map(|(_, t0)| {
            let t1 = marks
                .iter()
                .find(|(m, t)| m == "kafka-started" && t >= t0)
                .map_or(scrapes.last().map_or(0.0, |s| s.t), |(_, t)| *t);
            (*t0, t1)
        })
        .collect();
    title.draw_text(
        &format!(
            "drawn with plotters from the /metrics of a real run (scripts/dashboard-picture.sh), \
             not a Grafana screenshot{}",
            if outage.is_empty() {
                ""
            } else {
                "; shaded: Kafka stopped (then starting again)"
            }
        ),
        &("sans-serif", 16)
            .into_text_style(&title)
            .color(&RGBColor(110, 110, 110)),
        (20, 42),
    )?;
    let t_max = scrapes.last().map_or(1.0, |s| s.t).max(1.0);
    for (area, panel) in body.split_evenly((2, 3)).iter().zip(&panels) {
        let y_max = panel
            .lines
            .iter()
            .flat_map(|(_, pts, _)| pts.iter().map(|p| p.1))
            .fold(0.0f64, f64::max)
            .max(1.0)
            * 1.15;
        let mut chart = ChartBuilder::on(area)
            .caption(panel.title, ("sans-serif", 18))
            .margin(12)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(0f64..t_max, 0f64..y_max)?;
        chart
            .configure_mesh()
            .x_desc("seconds")
            .y_desc(panel.unit)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for (t0, t1) in &outage {
            chart.draw_series(std::iter::once(Rectangle::new(
                [(*t0, 0.0), (*t1, y_max)],
                RGBColor(220, 220, 220).filled(),
            )))?;
        }
        for (label, points, color) in &panel.lines {
            let color = *color;
            chart
                .draw_series(LineSeries::new(
                    points.iter().copied(),
                    color.stroke_width(2),
                ))?
                .label(label.as_str())
                .legend(move |(x, y)| {
                    PathElement::new([(x, y), (x + 18, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(RGBColor(200, 200, 200))
            .label_font(("sans-serif", 13))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
    }
    root.present()?;
    println!("{out}: {} scrapes over {t_max:.0} s", scrapes.len());
    Ok(())
}
